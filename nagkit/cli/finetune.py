"""`nagkit finetune`: fine-tune a bundle's (or an arch's) subnet on an ImageFolder, bundle it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nagkit.cli.options import BoundedInt, emit, json_option, seed_option, verbosity_option, workspace_option
from nagkit.nag.config import MAX_EPOCHS


@click.command("finetune")
@click.argument("bundle", required=False, metavar="[BUNDLE]")
@click.option("--data", required=True, metavar="DIR",
              help="ImageFolder: DIR/train/<class>/*.png and DIR/val/<class>/... (or a seeded split of train).")
@click.option("--epochs", type=BoundedInt(1, MAX_EPOCHS), required=True,
              help=f"Epochs of fine-tuning, 1..{MAX_EPOCHS:,} (1-2 are enough for a small folder).")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The new bundle folder (+ .zip beside it).")
@click.option("--arch", "arch_text", default=None, metavar="ARCH",
              help="Instead of a BUNDLE: a canonical arch string, OFA's dict as JSON, or @FILE.")
@click.option("--space", "space_name", default=None, help="The space of --arch (default ofa-mbv3-w1.0).")
@workspace_option
@click.option("--weights", default=None, metavar="CKPT",
              help="Supernet checkpoint (default: the bundle's, checked by sha256, or the workspace's).")
@click.option("--export", "formats", default="tflite,onnx", show_default=True, help="tflite, onnx or tflite,onnx.")
@click.option("--device-train", default="cpu", show_default=True, help="Train on cpu, cuda or cuda:N.")
@click.option("--val-fraction", type=float, default=0.2, show_default=True,
              help="Seeded per-class val split when DIR has no val/.")
@click.option("--mixed-sizes", is_flag=True,
              help="Accept images of several sizes in --data (each resized by the space's transform).")
@click.option("--lr", type=float, default=0.05, show_default=True, help="Peak learning rate (cosine decay to 0).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--no-augment", is_flag=True, help="Train on the plain transform (no crop/shift/flip).")
@click.option("--force", is_flag=True, help="Replace an existing bundle at --out.")
@seed_option
@json_option
@verbosity_option
def finetune(bundle: str | None, data: str, epochs: int, out: Path, arch_text: str | None, space_name: str | None,
             workspace: str | None, weights: str | None, formats: str, device_train: str, val_fraction: float,
             mixed_sizes: bool, lr: float, batch_size: int, no_augment: bool, force: bool, seed: int, as_json: bool) -> None:
    """Fine-tune a subnet on your own classes and bundle it.

    The classifier is replaced for the class folders of --data, BN statistics are recalibrated
    on your images, and the val accuracy before (inherited weights, class-mean head) and after
    fine-tuning goes into the manifest, with the exported model's own accuracy on val.

    \b
    Examples:
      nagkit finetune out/my-bundle --data photos/ --epochs 2 --out out/my-classes
      nagkit finetune --space ofa-mbv3-w1.0 --arch r160-k3e3.k3e3-... --weights ofa_mbv3_d234_e346_k357_w1.0.pth \\
        --data photos/ --epochs 2 --out out/my-classes
    """
    from nagkit.app.build import parse_export
    from nagkit.app.finetune import FinetuneOptions
    from nagkit.app.finetune_bundle import finetune_to_bundle, resolve_source
    from nagkit.cli.space import read_arch_arg

    opts = FinetuneOptions(epochs=epochs, data=data, device_train=device_train, val_fraction=val_fraction, seed=seed,
                           mixed_sizes=mixed_sizes, lr=lr, batch_size=batch_size, augment=not no_augment)
    opts.check()
    src = resolve_source(bundle=bundle, arch=read_arch_arg(arch_text) if arch_text else None, space=space_name,
                         workspace=workspace, weights=weights)
    res = finetune_to_bundle(src, opts, out=out, formats=parse_export(formats)[0], force=force)
    emit(res, as_json, _human)


def _human(r: dict[str, Any]) -> str:
    d = r["data"]
    lines = [
        f"bundle    {r['bundle']}  (+ {r['zip']})",
        f"arch      {r['arch']} ({r['space']})",
        f"data      {d['dir']}: {len(r['labels'])} classes, {d['train_images']} train / {d['val_images']} val images "
        f"({d['val']}); {d['skipped_images']} unreadable image(s) skipped",
        f"val       before {100 * r['before']['value']:.2f}%  after {r['epochs']} epoch(s) "
        f"{100 * r['after']['value']:.2f}%  (PyTorch, trained on {r['device_train']})",
        f"exported  {100 * r['exported']['value']:.2f}% on val: {r['exported']['evaluated']}",
        "time      " + ", ".join(f"{k} {v:.2f}s" for k, v in r["durations_s"].items()),
    ]
    return "\n".join(lines)
