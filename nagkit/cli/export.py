"""`nagkit export`: a subnet of a supernet checkpoint to ONNX and/or TFLite, with parity checks."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from nagkit.cli.options import emit, json_option, log, seed_option, space_option, verbosity_option


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
@click.option("--format", "fmt", type=click.Choice(["onnx", "tflite", "both"]), default="both",
              show_default=True, help="What to write.")
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
def export(weights: str | None, random_init: bool, space_name: str, arch_text: str, fmt: str, out: Path | None,
           batch: int, as_bundle: bool, force: bool, seed: int, as_json: bool) -> None:
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
    from nagkit.cli.space import read_arch_arg
    from nagkit.errors import BadInputError
    from nagkit.export.exporter import normalize_formats
    from nagkit.space import get_space

    sp = get_space(space_name)
    arch = sp.parse_arch(read_arch_arg(arch_text))
    formats = normalize_formats(fmt)
    if weights is None and not random_init:
        raise BadInputError("no weights given: pass --weights CKPT (a supernet checkpoint) or --random-init "
                            "(a random model, only good for latency checks)",
                            hint=f"nagkit export --weights CKPT --space {sp.name} --arch ... --out DIR")
    if weights is not None and random_init:
        raise BadInputError("--weights and --random-init exclude each other; pass one")
    out = Path(out) if out is not None else Path("nagkit-export") / str(arch)
    if out.suffix.lower() in (".onnx", ".tflite", ".zip"):
        raise BadInputError(f"--out {str(out)!r} looks like a file name; --out is a folder "
                            f"(the files are written as {str(out.with_suffix(''))}/model.onnx, .../model.tflite)",
                            hint=f"use --out {str(out.with_suffix(''))}")
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {str(out)!r} exists and is not a folder", hint="choose another --out")
    if as_bundle:
        from nagkit.export.bundle import check_bundle_target

        check_bundle_target(out, force=force)

    result = run_export(sp, arch, weights=weights, formats=formats, out=out, batch=batch, seed=seed,
                        as_bundle=as_bundle, force=force)
    emit(result, as_json, _human)


def run_export(sp, arch, *, weights: str | None, formats: tuple[str, ...], out: Path, batch: int, seed: int,
               as_bundle: bool, force: bool) -> dict[str, Any]:
    """Load (or random-init), extract, export, check parity; optionally write a bundle."""
    import tempfile

    from nagkit.export.exporter import export_model

    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    if weights is not None:
        from nagkit.supernet import load_supernet, sha256_file

        log(f"loading {weights} ({sp.name})")
        net = load_supernet(weights, sp)
        phases["load"] = time.perf_counter() - t0
        weights_sha = sha256_file(weights)
        t1 = time.perf_counter()
        module = net.extract(arch)
        del net
        phases["extract"] = time.perf_counter() - t1
    else:
        from nagkit.supernet import StaticNet

        log(f"random-init subnet (seed {seed}); only good for latency checks")
        t1 = time.perf_counter()
        module = StaticNet.from_arch(sp, arch, seed=seed)
        phases["extract"] = time.perf_counter() - t1
        weights_sha = None
    shape = (batch, sp.in_channels, arch.r, arch.r)
    log(f"exporting {arch} to {', '.join(formats)} (input {'x'.join(map(str, shape))} NCHW float32)")
    if as_bundle:
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.models-", dir=out.parent))
    else:
        work = out
    try:
        res = export_model(module, shape, formats, work, seed=seed, force=force)
        for k, v in res.durations_s.items():
            phases[k] = v
        params = sp.params(arch)
        result: dict[str, Any] = {
            "space": sp.name,
            "arch": str(arch),
            "ofa": sp.to_ofa_dict(arch),
            "weights": str(weights) if weights else "random-init",
            "weights_sha256": weights_sha,
            "params": params,
            "params_module": int(sum(p.numel() for p in module.parameters())),
            "macs": sp.macs(arch),
            "input": {"shape": list(shape), "layout": "NCHW", "dtype": "float32"},
            "files": {},
            "versions": res.versions,
        }
        if as_bundle:
            from nagkit.export.bundle import make_manifest, verify_bundle, write_bundle

            manifest = make_manifest(sp, arch, export=res, weights_sha256=weights_sha,
                                     weights_source=str(weights) if weights else None)
            t1 = time.perf_counter()
            b = write_bundle(out, res.paths, manifest, force=force)
            phases["bundle"] = time.perf_counter() - t1
            t1 = time.perf_counter()
            result["bundle_check"] = verify_bundle(b.zip_path, module, seed=seed + 1)
            phases["bundle_check"] = time.perf_counter() - t1
            result["bundle"] = {"folder": str(b.root), "zip": str(b.zip_path), "manifest": str(b.root / "manifest.json")}
            final = {f: b.root / Path(p).name for f, p in res.paths.items()}
        else:
            final = res.paths
        for f, m in res.models.items():
            w = m.worst_parity
            result["files"][f] = {
                "path": str(final[f]), "size_bytes": m.size_bytes, "sha256": m.sha256,
                "converter": f"{m.converter} {m.converter_version}",
                "runtime": f"{m.runtime} {m.runtime_version}",
                "parity_max_abs_diff": w.max_abs_diff if w else None,
                "parity_tolerance": w.tolerance if w else None,
                "parity_seed": w.seed if w else None,
            }
    finally:
        if as_bundle:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    phases["total"] = time.perf_counter() - t0
    result["durations_s"] = {k: round(v, 3) for k, v in phases.items()}
    return result


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
        lines.append(
            f"  {f:<7}  {m['path']}  {m['size_bytes'] / 1e6:.2f} MB   parity max|diff| {m['parity_max_abs_diff']:.2e}"
            f" <= {m['parity_tolerance']:.1e} ({m['runtime']}, seed {m['parity_seed']})"
        )
    if "bundle" in r:
        lines.append(f"  bundle   {r['bundle']['folder']}  +  {r['bundle']['zip']}")
        chk = r.get("bundle_check") or {}
        parts = [f"{f} parity {m['parity']['max_abs_diff']:.1e}" for f, m in chk.get("models", {}).items()]
        if "cross_runtime" in chk:
            parts.append(f"LiteRT vs ONNX Runtime {chk['cross_runtime']['max_abs_diff']:.1e}")
        lines.append(f"  checked  the zip re-opened (seed {chk.get('seed')}): " + ", ".join(parts))
    lines.append("  time     " + ", ".join(f"{k} {v:.2f}s" for k, v in r["durations_s"].items()))
    return "\n".join(lines)
