"""`nagkit build` (budget -> verified bundle) and `nagkit check` (a latency gate for CI)."""

from __future__ import annotations

import click

from nagkit.cli.options import FINITE, emit, json_option, verbosity_option


@click.command("check")
@click.argument("target", metavar="BUNDLE_OR_MODEL")
@click.option("--device", "device_spec", required=True,
              help="cpu[:runtime=litert|onnxruntime,threads=N,cores=..], adb:SERIAL, adb:HOST:PORT, or a profile.")
@click.option("--budget", type=FINITE, required=True, help="Latency budget in milliseconds.")
@click.option("--runs", type=int, default=None, help="Minimum number of timed runs.")
@json_option
@verbosity_option
def check(target: str, device_spec: str, budget: float, runs: int | None, as_json: bool) -> None:
    """Measure BUNDLE_OR_MODEL on a device: exit 0 if the median is within --budget, 1 if not."""
    from nagkit.app.check import check as run_check

    res = run_check(target, device_spec, budget, runs)
    emit(res.to_dict(), as_json, lambda r: (
        f"{'PASS' if r['passed'] else 'FAIL'}: median {r['median_ms']:.3f} ms "
        f"{'<=' if r['passed'] else '>'} budget {r['budget_ms']:g} ms on {r['device']} "
        f"(p10 {r['latency']['p10_ms']:.3f}, p90 {r['latency']['p90_ms']:.3f}, n={r['latency']['n']}) [{r['model']}]"))
    res.raise_if_failed()  # the result is printed either way; over budget is a failed check (exit 1)


@click.command("build")
@click.option("--budget", type=FINITE, required=True, help="Latency budget in milliseconds.")
@click.option("--workspace", "-w", default=None, help="Workspace folder or preset (default: ./nagkit.toml).")
@click.option("--device", "device_spec", default=None,
              help="Measure the exported model here and fall back to the next candidate if over budget "
              "(cpu, cpu:runtime=onnxruntime, adb:SERIAL, adb:HOST:PORT, or a profile).")
@click.option("--export", "formats", default="tflite", show_default=True, help="tflite, onnx or tflite,onnx.")
@click.option("--out", default=None, help="Bundle folder (a .zip is written beside it). Default: nagkit-bundle-<B>ms.")
@click.option("--force", is_flag=True, help="Replace an existing bundle folder.")
@click.option("--weights", default=None, help="Supernet checkpoint (an OFA .pth is imported on the fly).")
@click.option("--random-init", is_flag=True, help="Random weights: a latency-only bundle (said in the manifest).")
@click.option("--finetune", type=int, default=0, help="Fine-tune the subnet for N epochs on the workspace data.")
@click.option("--max-tries", type=int, default=3, show_default=True, help="Candidates to try on the device.")
@click.option("--samples", type=int, default=None, help="Generator samples per budget.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--accuracy", "accuracy_mode", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Ask the accuracy source for the exported arch's accuracy (auto: unless the "
                                      "source is a supernet evaluated here without a cached value, ~30 s on a CPU).")
@json_option
@verbosity_option
def build(budget: float, workspace: str | None, device_spec: str | None, formats: str, out: str | None, force: bool,
          weights: str | None, random_init: bool, finetune: int, max_tries: int, samples: int | None, seed: int,
          accuracy_mode: str, as_json: bool) -> None:
    """Generate the best arch for --budget, export it with supernet weights, verify, bundle."""
    from nagkit.app.build import BuildOptions
    from nagkit.app.build import build as run_build

    if random_init and weights:
        raise click.BadParameter("--random-init conflicts with --weights", param_hint="--random-init")
    res = run_build(budget, workspace=workspace, options=BuildOptions(
        device_spec=device_spec, formats=formats, out=out, force=force, weights=weights, random_init=random_init,
        finetune=finetune, max_tries=max_tries, samples=samples, seed=seed, accuracy=accuracy_mode))

    def human(r: dict) -> str:
        m = r["measured"]
        lines = [
            f"bundle    {r['bundle']}  (+ {r['zip']})",
            f"arch      {r['arch']}",
            f"budget    {r['budget_ms']:g} ms",
            f"predicted {r['predicted_ms']:.3f} ms (table; raw sum {r['predicted_raw_ms']:.3f} ms)",
            f"measured  " + (f"{m['median_ms']:.3f} ms median on {r['device']} (p10 {m['p10_ms']:.3f}, "
                             f"p90 {m['p90_ms']:.3f}, n={m['n']})" if m else "(no --device given)"),
            f"accuracy  " + (f"{100 * r['accuracy']:.2f}% ({r['accuracy_source']})" if r["accuracy"] is not None
                             else "(random weights: no accuracy; see the manifest notes)" if r["weights"] == "random-init"
                             else "(not measured: pass --accuracy always to ask the accuracy source)"),
            f"weights   {r['weights']}",
            f"parity    " + ", ".join(f"{f} max|diff| {v:.2e}" for f, v in r["parity"].items() if v is not None),
            f"attempts  {len(r['attempts'])}" + "".join(
                f"\n  - {a['arch']}: " + ("accepted" if a["accepted"] else a["note"]) for a in r["attempts"]),
            "time      " + ", ".join(f"{k} {v:.2f}s" for k, v in r["timings_s"].items()),
        ]
        return "\n".join(lines)

    emit(res.to_dict(), as_json, human)
