"""`nagkit export`: a subnet of a supernet checkpoint to ONNX and/or TFLite, with parity checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nagkit.cli.options import FINITE, emit, json_option, log, seed_option, space_option, verbosity_option


@click.command("export")
@click.option("--weights", "weights", default=None, metavar="CKPT",
              help="Supernet checkpoint: an OFA .pth (plain state_dict or {'state_dict': ...}) or one "
              "written by `nagkit supernet train`. Loaded with torch.load(weights_only=True).")
@click.option("--random-init", is_flag=True,
              help="No checkpoint: a seeded random-init subnet (only good for latency checks).")
@space_option
@click.option("--arch", "arch_text", required=True, metavar="ARCH",
              help="Canonical string (r224-k3e4.k5e6-...), OFA's dict as JSON "
              "('{\"ks\": [20], \"e\": [20], \"d\": [5], \"r\": 224}'), or @FILE holding either.")
@click.option("--format", "fmt", default="both", show_default=True, metavar="onnx|tflite|both|tflite-int8|onnx-int8|tflite-fp16",
              help="What to write. tflite-int8 / onnx-int8: static int8 quantization (needs --data). tflite-fp16: "
                   "float16 weights, checked against PyTorch with the same rounded weights.")
@click.option("--data", default=None, metavar="DIR|fashion-mnist",
              help="With --format tflite-int8: the images to calibrate on (training split) and judge int8 against "
                   "fp32 on (val/test split): an ImageFolder, or fashion-mnist (Debian's package).")
@click.option("--max-int8-drop", type=FINITE, default=1.0, show_default=True, metavar="POINTS",
              help="With --format tflite-int8: fail (exit 1) when int8 loses more top-1 accuracy than this.")
@click.option("--out", "out", default=None, type=click.Path(file_okay=True, dir_okay=True, path_type=Path),
              metavar="DIR",
              help="Output FOLDER (created if missing); the files are DIR/model.onnx and DIR/model.tflite. "
              "With --bundle, DIR becomes a bundle folder and DIR.zip is written beside it. "
              "[default: nagkit-export/<canonical arch>]")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="Fixed batch size of the exported models' input (N x 3 x r x r, NCHW).")
@click.option("--bundle", "as_bundle", is_flag=True,
              help="Write a bundle: models, manifest.json and README.md in DIR, plus DIR.zip.")
@click.option("--force", is_flag=True, help="Replace existing output files / bundle.")
@seed_option
@json_option
@verbosity_option
def export(weights: str | None, random_init: bool, space_name: str, arch_text: str, fmt: str, data: str | None,
           max_int8_drop: float, out: Path | None, batch: int, as_bundle: bool, force: bool, seed: int,
           as_json: bool) -> None:
    """Export the subnet ARCH of a supernet checkpoint to ONNX and/or TFLite.

    Each exported file is run (ONNX Runtime, LiteRT) on a seeded input and compared with
    PyTorch; the export fails (exit 1, nothing written) when
    max|exported - PyTorch| > 1e-4 * max(1, max|PyTorch|). The models take NCHW float32 input
    (N x 3 x r x r, N = --batch), normalised with the space's mean/std. --seed seeds the
    parity inputs (and the weights of --random-init).

    Output: --out DIR is always a folder; existing DIR/model.* files (or, with --bundle, an
    existing DIR or DIR.zip) are replaced only with --force. The result (paths, sizes, parity,
    params, MACs, versions, time per phase) goes to stdout, logs to stderr.

    \b
    Example:
      nagkit export --weights ofa_mbv3_d234_e346_k357_w1.0.pth --space ofa-mbv3-w1.0 \\
        --arch r160-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3 --format both --out out/m160
    """
    from nagkit.app.export import check_request, export_subnet
    from nagkit.cli.space import read_arch_arg
    from nagkit.export.exporter import parse_export
    from nagkit.space import get_space

    sp = get_space(space_name)
    arch = sp.parse_arch(read_arch_arg(arch_text))
    formats, precision = parse_export(fmt)
    if not 0 <= max_int8_drop <= 100:
        raise click.BadParameter(f"must be between 0 and 100 points, got {max_int8_drop}", param_hint="--max-int8-drop")
    out = check_request(sp, weights=weights, random_init=random_init, out=out, arch=arch, as_bundle=as_bundle,
                        force=force, precision=precision, data=data)
    result = export_subnet(sp, arch, weights=weights, formats=formats, out=out, batch=batch, seed=seed,
                           as_bundle=as_bundle, force=force, progress=log, precision=precision, data=data,
                           max_int8_drop=max_int8_drop)
    emit(result, as_json, _human)


def _human(r: dict[str, Any]) -> str:
    lines = [
        f"exported {r['arch']}",
        f"  space    {r['space']}   weights {r['weights']}"
        + (f" (sha256 {r['weights_sha256'][:16]}...)" if r["weights_sha256"] else " (latency checks only)"),
        f"  ofa      {json.dumps(r['ofa'])}",
        f"  params   {r['params']:,} ({r['params'] / 1e6:.2f} M)   MACs {r['macs']:,} ({r['macs'] / 1e6:.1f} M)",
        f"  input    {'x'.join(map(str, r['input']['shape']))} {r['input']['layout']} {r['input']['dtype']}",
    ]
    for f, m in r["files"].items():
        parity = (f"parity max|diff| {m['parity_max_abs_diff']:.2e} <= {m['parity_tolerance']:.1e} ({m['runtime']}, "
                  f"seed {m['parity_seed']})" if m["parity_max_abs_diff"] is not None else f"int8 ({m['runtime']})")
        lines.append(f"  {f:<7}  {m['path']}  {m['size_bytes'] / 1e6:.2f} MB   {parity}")
        if m.get("fp16_vs_fp32"):
            q = m["fp16_vs_fp32"]
            lines.append(f"  fp16     parity is against PyTorch with its weights rounded to float16; against fp32: "
                         f"max|diff| {q['max_abs_diff']:.2e} on logits up to {q['max_abs_ref']:.3g}")
    if r.get("int8"):
        q = r["int8"]
        lines.append(f"  int8     top-1 agreement with fp32 {100 * q['top1_agreement']:.2f}%, accuracy "
                     f"{100 * q['int8_accuracy']:.2f}% vs fp32 {100 * q['fp32_accuracy']:.2f}% (drop "
                     f"{q['drop_points']:.2f} points; {q['images']} {q['dataset']} images)")
    if "bundle" in r:
        lines.append(f"  bundle   {r['bundle']['folder']}  +  {r['bundle']['zip']}")
        chk = r.get("bundle_check") or {}
        parts = [f"{f} parity {m['parity']['max_abs_diff']:.1e}" if "parity" in m else f"{f} runs"
                 for f, m in chk.get("models", {}).items()]
        if "cross_runtime" in chk:
            parts.append(f"LiteRT vs ONNX Runtime {chk['cross_runtime']['max_abs_diff']:.1e}")
        lines.append(f"  checked  the zip re-opened (seed {chk.get('seed')}): " + ", ".join(parts))
    lines.append("  time     " + ", ".join(f"{k} {v:.2f}s" for k, v in r["durations_s"].items()))
    return "\n".join(lines)
