"""`nagkit build` (budget -> verified bundle) and `nagkit check` (a latency gate for CI)."""

from __future__ import annotations

import click

from nagkit.cli.options import (FINITE, BoundedInt, emit, json_option, limit_lines, limit_options, samples_flag,
                                seed_flag, verbosity_option)
from nagkit.nag.config import MAX_EPOCHS


@click.command("check")
@click.argument("target", metavar="BUNDLE_OR_MODEL")
@click.option("--device", "device_spec", default=None,
              help="cpu[:runtime=litert|onnxruntime,threads=N,cores=..], adb:SERIAL, adb:HOST:PORT, or a profile.")
@click.option("--budget", type=FINITE, default=None, help="Latency budget in milliseconds (with --device).")
@click.option("--runs", type=int, default=None, help="Minimum number of timed runs.")
@json_option
@verbosity_option
def check(target: str, device_spec: str | None, budget: float | None, runs: int | None, as_json: bool) -> None:
    """Verify BUNDLE_OR_MODEL and measure it on a device: exit 0 if the median is within
    --budget, 1 if not. A bundle is verified first (its manifest, only the files it lists, their
    hashes and the models' shapes); without --device and --budget, that (plus one run of each
    model) is all, exit 0 when it holds."""
    if (device_spec is None) != (budget is None):
        raise click.BadParameter("--device and --budget go together (or leave both out to only verify a bundle)",
                                 param_hint="--device/--budget")
    if device_spec is None:
        from nagkit.app.check import verify

        v = verify(target)
        emit(v.to_dict(), as_json, lambda r: (
            f"OK: bundle verified: {', '.join(r['files'])} (sha256, sizes), input {r['input']['name']} "
            f"{r['input']['shape']}, output {r['output']['name']} {r['output']['shape']}"
            + (f", LiteRT vs ONNX Runtime max|diff| {r['cross_runtime']['max_abs_diff']:.1e}" if r["cross_runtime"]
               else "") + f"; latency {r['latency_status']} [{r['bundle']}]"))
        return
    from nagkit.app.check import check as run_check

    res = run_check(target, device_spec, budget, runs)
    emit(res.to_dict(), as_json, lambda r: (
        f"{'PASS' if r['passed'] else 'FAIL'}: median {r['median_ms']:.3f} ms "
        f"{'<=' if r['passed'] else '>'} budget {r['budget_ms']:g} ms on {r['device']} "
        f"(p10 {r['latency']['p10_ms']:.3f}, p90 {r['latency']['p90_ms']:.3f}, n={r['latency']['n']}) [{r['model']}]"))
    res.raise_if_failed()  # the result is printed either way; over budget is a failed check (exit 1)


@click.command("build")
@click.option("--budget", type=FINITE, required=True, help="Latency budget in milliseconds.")
@click.option("--workspace", "-w", default=None,
              help="Workspace folder or name (default: ./nagkit.toml, else the default workspace fmnist).")
@click.option("--device", "device_spec", default=None,
              help="Build for this device: its own latency table when one exists, the exported model measured "
                   "there (the next candidate if over budget). cpu, cpu:runtime=onnxruntime, adb:SERIAL, "
                   "adb:HOST:PORT, or a profile.")
@click.option("--export", "formats", default="tflite", show_default=True,
              help="tflite, onnx or tflite,onnx (fp32); tflite-int8 (or onnx-int8): full-integer static quantization, "
                   "calibrated on the workspace's images (with --finetune N --data DIR: on DIR's), judged by accuracy "
                   "against fp32; tflite-fp16: float16 weights, float32 compute (needs an fp16 table, or "
                   "--quantize-after).")
@click.option("--max-int8-drop", type=FINITE, default=1.0, show_default=True, metavar="POINTS",
              help="With --export tflite-int8: fail (exit 1) when int8 loses more top-1 accuracy than this.")
@click.option("--quantize-after", is_flag=True,
              help="With --export tflite-int8 (or tflite-fp16) on a workspace with an fp32 table and no twin of that "
                   "precision: choose the arch on the fp32 table, then quantize it (its latency at that precision is "
                   "not predicted; said in the manifest).")
@click.option("--out", default=None, help="Bundle folder (a .zip is written beside it). Default: nagkit-bundle-<B>ms.")
@click.option("--force", is_flag=True, help="Replace an existing bundle folder.")
@click.option("--weights", default=None, help="Supernet checkpoint (an OFA .pth is imported on the fly).")
@click.option("--random-init", is_flag=True, help="Random weights: a latency-only bundle (said in the manifest).")
@click.option("--finetune", type=BoundedInt(0, MAX_EPOCHS), default=0, metavar="EPOCHS",
              help=f"Fine-tune the subnet for N epochs (0..{MAX_EPOCHS:,}): on --data, or on the workspace's "
                   "Fashion-MNIST.")
@click.option("--data", default=None, metavar="DIR",
              help="Only with --finetune: an ImageFolder of your classes (DIR/train/<class>/*.png, DIR/val/...) to "
                   "fine-tune on; the classifier is replaced for them, and an int8 export calibrates on them too.")
@click.option("--mixed-sizes", is_flag=True,
              help="Accept images of several sizes in --data (each resized by the space's transform).")
@click.option("--device-train", default="cpu", show_default=True, help="Fine-tune on cpu, cuda or cuda:N.")
@click.option("--max-tries", type=BoundedInt(1, 1000), default=3, show_default=True,
              help="Candidates to try on the device (1..1000).")
@samples_flag("Generator samples per budget (default: the workspace's).")
@seed_flag()
@click.option("--accuracy", "accuracy_mode", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Ask the accuracy source for the exported arch's accuracy (auto: unless the "
                                      "source is a supernet evaluated here without a cached value, ~30 s on a CPU). "
                                      "never: also skips running the exported file on the workspace's test images "
                                      "(~40 s for Fashion-MNIST's 10,000 on a 2-core CPU); the manifest then has no "
                                      "accuracy.")
@limit_options
@json_option
@verbosity_option
def build(budget: float, workspace: str | None, device_spec: str | None, formats: str, out: str | None, force: bool,
          weights: str | None, random_init: bool, finetune: int, data: str | None, mixed_sizes: bool, device_train: str,
          max_tries: int, samples: int | None, seed: int, accuracy_mode: str, max_int8_drop: float,
          quantize_after: bool, max_params: str | None, max_size_mb: str | None, max_macs: str | None,
          max_peak_kb: str | None, as_json: bool) -> None:
    """Generate the best arch for --budget, export it with supernet weights, verify, bundle.

    With --device D the device is contacted first, and predictions and the budget's range come
    from D's own latency table when one exists (`nagkit profile --device D` makes it; the
    workspace is re-targeted to it and its generator trained once, on demand). Without
    --device nothing is measured and the bundle is marked unverified."""
    from nagkit.app.build import BuildOptions
    from nagkit.app.build import build as run_build
    from nagkit.cli.options import log, phase_progress
    from nagkit.nag.constraints import Limits

    limits = Limits.parse(max_params=max_params, max_size_mb=max_size_mb, max_macs=max_macs, max_peak_kb=max_peak_kb)

    if random_init and weights:
        raise click.BadParameter("--random-init conflicts with --weights", param_hint="--random-init")
    from nagkit.app.int8 import Int8DropError

    try:
        res = run_build(budget, workspace=workspace, options=BuildOptions(
            device_spec=device_spec, formats=formats, out=out, force=force, weights=weights, random_init=random_init,
            finetune=finetune, data=data, mixed_sizes=mixed_sizes, device_train=device_train, max_tries=max_tries,
            samples=samples, seed=seed, accuracy=accuracy_mode, max_int8_drop=max_int8_drop,
            quantize_after=quantize_after, limits=limits), say=log,
            progress=phase_progress())
    except Int8DropError as e:  # the figures on stdout too, for machines; the error (exit 1) on stderr
        if as_json:
            emit({"bundle": None, "error": e.message, "int8": e.record}, True)
        raise

    def human(r: dict) -> str:
        m = r["measured"]
        lines = [
            f"bundle    {r['bundle']}  (+ {r['zip']})",
            f"workspace {r['workspace']}",
            f"arch      {r['arch']}",
            f"budget    {r['budget_ms']:g} ms",
            *([f"note      {r['note']}"] if r["note"] else []),
            f"predicted {r['predicted_ms']:.3f} ms (raw block sum {r['predicted_raw_ms']:.3f} ms)",
            f"table     {r['table_note']}",
            *_fidelity_lines(r.get("table_fidelity")),
            *([f"re-aimed  generated for {r['re_aims'][-1]['aim_ms']:.4g} ms on the table: this device measured "
               f"{r['re_aims'][-1]['ratio']:.2f}x its predictions"] if r.get("re_aims") else []),
            f"measured  " + (f"{m['median_ms']:.3f} ms median on {r['device']} (p10 {m['p10_ms']:.3f}, "
                             f"p90 {m['p90_ms']:.3f}, n={m['n']})" if m else
                             "not measured (no --device): the bundle is unverified, its manifest says so"),
            f"accuracy  " + (f"{100 * r['accuracy']:.2f}% ({r['accuracy_source']})" if r["accuracy"] is not None
                             else "(random weights: no accuracy; see the manifest notes)" if r["weights"] == "random-init"
                             else "(not measured: pass --accuracy always to ask the accuracy source)"),
            f"weights   {r['weights']}",
            f"parity    " + ", ".join(f"{f} max|diff| {v:.2e}" for f, v in r["parity"].items() if v is not None)
            + (" (against PyTorch with its weights rounded to float16)" if r.get("precision") == "fp16" else ""),
            *([_int8_line(r["int8"])] if r.get("int8") else []),
            *_limits_lines(r.get("constraints")),
            f"attempts  {len(r['attempts'])}" + "".join(
                f"\n  - {a['arch']}: " + ("accepted" if a["accepted"] else a["note"]) for a in r["attempts"]),
            "time      " + ", ".join(f"{k} {v:.2f}s" for k, v in r["timings_s"].items()),
        ]
        return "\n".join(lines)

    emit(res.to_dict(), as_json, human)


def _fidelity_lines(tf: dict | None) -> list[str]:
    """What the table's profile reached under its time budget, and its warnings (none without the record)."""
    from nagkit.latency.table_fidelity import fidelity_line

    if not tf:
        return []
    return [f"fidelity  {fidelity_line(tf)}", *(f"WARNING   {w}" for w in tf["warnings"])]


def _limits_lines(c: dict | None) -> list[str]:
    """What the network reaches (exact counts, the files' bytes, the peak estimate) and, with
    limits, each against its limit and the one that binds."""
    if not c:
        return []
    r = c["reached"]
    files = ", ".join(f"{k} {v:,} bytes" for k, v in (r["file_bytes"] or {}).items())
    peak = f"{r['peak_kb']:.1f} kB peak activations (estimate, {c.get('precision', 'fp32')})" if r["peak_kb"] is not None \
        else "peak activations not modelled at int8"
    return [f"resources {r['params']:,} params, {r['macs']:,} MACs, {peak}; {files}", *limit_lines(c)]


def _int8_line(q: dict) -> str:
    return (f"int8      top-1 agreement with fp32 {100 * q['top1_agreement']:.2f}%, accuracy {100 * q['int8_accuracy']:.2f}% "
            f"vs fp32 {100 * q['fp32_accuracy']:.2f}% (drop {q['drop_points']:.2f} points <= {q['max_drop_points']:g}; "
            f"{q['images']} {q['dataset']} images)")
