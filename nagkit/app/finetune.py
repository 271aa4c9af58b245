"""Fine-tuning a subnet on the user's own images (an ImageFolder) or on the workspace's
Fashion-MNIST, with accuracy before and after; used by ``nagkit build --finetune N`` and
``nagkit finetune`` (:mod:`nagkit.app.finetune_bundle`).

The recipe on an ImageFolder (docs/decisions.md, "Deployable bundles"):

1. the subnet keeps the supernet's weights; its classifier is replaced by one for the folder's
   classes (labels = the class folder names);
2. BN statistics are recalibrated on (up to 2,000 of) the training images, with the space's
   transform and no augmentation;
3. the new head is set to the nearest-class-mean rule of the inherited features: the "before"
   model, whose accuracy on the val split is reported (no gradient step yet);
4. every weight is trained for N epochs (SGD + Nesterov, lr 0.05 cosine to 0, batch 32, label
   smoothing 0.1, gradient norm clipped at 5) on augmented images
   (:mod:`nagkit.images.preprocessing`);
5. BN statistics are recalibrated again as in 2, and the val accuracy is the "after".

CPU by default; ``device_train="cuda"`` trains on the GPU (the model comes back to the CPU for
export). Every random draw is seeded by ``seed``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from nagkit.errors import BadInputError, DeviceError, check_int, check_seed
from nagkit.nag.config import MAX_EPOCHS

log = logging.getLogger(__name__)

CALIB_IMAGES = 2000


@dataclass(frozen=True)
class FinetuneOptions:
    """``epochs``; ``data``: an ImageFolder (None: the workspace's Fashion-MNIST);
    ``device_train``: cpu, cuda or cuda:N; ``val_fraction``: the seeded val split when the folder
    has no ``val/``; ``mixed_sizes``: accept images of several sizes; ``augment``: train-time augmentation (off: the plain transform)."""

    epochs: int
    data: str | None = None
    device_train: str = "cpu"
    val_fraction: float = 0.2
    seed: int = 0
    mixed_sizes: bool = False  # accept an ImageFolder of several image sizes (each resized by the transform)
    lr: float = 0.05
    backbone_lr_factor: float = 1.0
    batch_size: int = 32
    augment: bool = True

    def check(self) -> None:
        check_int(self.epochs, 1, MAX_EPOCHS, "epochs (--epochs, build's --finetune)")
        check_seed(self.seed)
        if not 0 < self.lr < 10:
            raise BadInputError(f"--lr must be in (0, 10), got {self.lr}")
        if not 1 < self.batch_size <= 4096:
            raise BadInputError(f"--batch-size must be in 2..4096, got {self.batch_size}")
        if not 0 < self.val_fraction < 1:
            raise BadInputError(f"--val-fraction must be between 0 and 1, got {self.val_fraction}")
        train_device(self.device_train)


@dataclass
class FinetuneResult:
    """The fine-tuned subnet (on the CPU, eval mode), its labels and what happened."""

    module: Any
    labels: list[str] | None
    before: dict[str, Any]  # accuracy records (nagkit.export.manifest.accuracy_record)
    after: dict[str, Any]
    record: dict[str, Any]  # the manifest's weights.fine_tuned
    data: Any = None  # the FolderData, for evaluating the exported model on its val split
    losses: list[float] = field(default_factory=list)


def train_device(spec: str):
    """``torch.device`` of ``--device-train``: cpu, cuda or cuda:N (a visible GPU)."""
    import torch

    spec = str(spec)
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "cuda" or (spec.startswith("cuda:") and spec[5:].isdigit()):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        idx = int(spec[5:]) if ":" in spec else 0
        if idx >= n:
            raise DeviceError(f"--device-train {spec}: {'no CUDA GPU is visible' if n == 0 else f'only {n} GPU(s)'} "
                              "on this machine", hint="train on the CPU: --device-train cpu (the default)")
        return torch.device(spec)
    raise BadInputError(f"--device-train {spec!r} is not valid; valid: cpu, cuda, cuda:N")


def _seconds(t0: float) -> float:
    return round(time.perf_counter() - t0, 2)


def finetune_on_folder(sub, space, arch, data, opts: FinetuneOptions) -> FinetuneResult:
    """Fine-tune ``sub`` (``arch`` of ``space``, supernet weights) on ``data`` (a
    :class:`~nagkit.images.folder.FolderData`) with a new head; the module docstring's recipe."""
    import torch

    from nagkit.export.manifest import accuracy_record
    from nagkit.images.folder import batches
    from nagkit.supernet.bn import recalibrate_bn
    from nagkit.supernet.finetune import Recipe, class_mean_head, replace_head, top1, train

    t0 = time.perf_counter()
    dev, r, n_cls, bs = train_device(opts.device_train), arch.r, len(data.classes), opts.batch_size
    sub = replace_head(sub.to(dev), n_cls, space.dropout, opts.seed)
    calib = min(CALIB_IMAGES, len(data.train))

    def plain(s, limit=None):
        return batches(s, space, r, 64, device=dev, limit=limit)

    def recalibrate():
        order = torch.Generator().manual_seed(opts.seed)
        recalibrate_bn(sub, (x for x, _ in batches(data.train, space, r, 64, shuffle=order, device=dev, limit=calib)))

    recalibrate()
    class_mean_head(sub, plain(data.train), n_cls)
    before, n_val = top1(sub, plain(data.val))
    log.info("fine-tuning %s on %d images of %d classes (%s), val %d: before %.2f%%", arch, len(data.train), n_cls,
             dev, n_val, 100 * before)
    shuffle = torch.Generator().manual_seed(opts.seed)
    aug = torch.Generator().manual_seed(opts.seed + 1) if opts.augment else None
    recipe = Recipe(lr=opts.lr, backbone_lr_factor=opts.backbone_lr_factor, batch_size=bs)
    n = len(data.train)
    steps = max(1, n // bs + (1 if n % bs >= 2 else 0))  # the batches images.folder.batches yields
    losses = train(sub, lambda _e: batches(data.train, space, r, bs, shuffle=shuffle, augment=aug, device=dev),
                   epochs=opts.epochs, steps_per_epoch=steps, recipe=recipe)
    recalibrate()
    after, _ = top1(sub, plain(data.val))
    log.info("after %d epoch(s): %.2f%% (%.1f s)", opts.epochs, 100 * after, time.perf_counter() - t0)
    where, dataset = f"val ({data.val_source})", f"imagefolder {data.root.name}"
    source = "nagkit fine-tuning (PyTorch subnet)"
    rec = {"data": data.summary(), "epochs": opts.epochs, "recipe": dict(recipe.to_dict(), steps_per_epoch=steps),
           "augmentation": _augmentation(space) if opts.augment else "none", "device": str(dev), "seed": opts.seed,
           "head": f"replaced: {n_cls} classes (labels: the class folders), set to the class means of the inherited "
                   "features before training",
           "bn_recalibration": f"{calib} training images, no augmentation, before and after training",
           "losses": [round(v, 4) for v in losses], "seconds": _seconds(t0)}
    return FinetuneResult(
        sub.cpu().eval(), list(data.classes),
        accuracy_record(before, dataset=dataset, split=where, images=n_val, source=source,
                        evaluated="before fine-tuning: inherited weights, BN recalibrated, class-mean head (PyTorch)"),
        accuracy_record(after, dataset=dataset, split=where, images=n_val, source=source,
                        evaluated=f"after {opts.epochs} epoch(s) of fine-tuning (PyTorch, fp32)"),
        rec, data, losses)


def _augmentation(space) -> str:
    if space.transform.resize == "shorter-side":
        return "random resized crop (25-100% of the area, aspect 3/4..4/3) to r x r, horizontal flip p=0.5"
    return "whole image to r x r, random shift of up to r/14 px (zero padding), horizontal flip p=0.5"


def finetune_on_fmnist(sub, space, arch, split, opts: FinetuneOptions) -> FinetuneResult:
    """Fine-tune ``sub`` on the workspace's Fashion-MNIST training split (its own head), with
    the val accuracy before and after (BN recalibrated on the split's calibration images)."""
    import torch

    from nagkit.export.manifest import accuracy_record
    from nagkit.supernet.evaluate import accuracy
    from nagkit.supernet.finetune import Recipe, finetune_subnet, recalibrate_subnet

    t0 = time.perf_counter()
    dev = train_device(opts.device_train)
    sp = split.load()
    x, y = torch.as_tensor(sp.val_x).unsqueeze(1), torch.as_tensor(sp.val_y)

    def val_acc(m) -> float:
        return accuracy(m.cpu(), x, y, arch.r, space.mean, space.std, batch_size=500)

    sub = recalibrate_subnet(sub.cpu(), space, split)
    before = val_acc(sub)
    recipe = Recipe(batch_size=128)  # the whole training split: nagkit's supernet recipe, lr 0.01
    sub = finetune_subnet(sub.to(dev), space, split, epochs=opts.epochs, seed=opts.seed, recipe=recipe)
    sub = recalibrate_subnet(sub.cpu(), space, split)
    after = val_acc(sub)
    where, source = f"val (split off the training set, seed {split.val_seed})", "nagkit fine-tuning (PyTorch subnet)"
    rec = {"data": {"dataset": "fashion-mnist", "train_images": int(len(sp.train_x)), "val_images": int(len(x))},
           "epochs": opts.epochs, "recipe": recipe.to_dict(), "device": str(dev), "seed": opts.seed,
           "augmentation": "±2 px shift, horizontal flip (as the supernet was trained)",
           "head": "kept (Fashion-MNIST's 10 classes)",
           "bn_recalibration": f"{split.calib_images} training images, before and after training",
           "seconds": _seconds(t0)}
    return FinetuneResult(
        sub.eval(), None,
        accuracy_record(before, dataset="fashion-mnist", split=where, images=len(x), source=source,
                        evaluated="before fine-tuning: supernet weights, BN recalibrated (PyTorch)"),
        accuracy_record(after, dataset="fashion-mnist", split=where, images=len(x), source=source,
                        evaluated=f"after {opts.epochs} epoch(s) of fine-tuning (PyTorch, fp32)"), rec)
