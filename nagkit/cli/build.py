"""`nagkit build` (budget -> verified bundle) and `nagkit check` (a latency gate for CI)."""

from __future__ import annotations

import sys

import click

from nagkit.cli.options import emit, json_option, verbosity_option


@click.command("check")
@click.argument("target", metavar="BUNDLE_OR_MODEL")
@click.option("--device", "device_spec", required=True,
              help="cpu[:runtime=litert|onnxruntime,threads=N,cores=..], adb:SERIAL, adb:HOST:PORT, or a profile.")
@click.option("--budget", type=float, required=True, help="Latency budget in milliseconds.")
@click.option("--runs", type=int, default=None, help="Minimum number of timed runs.")
@json_option
@verbosity_option
def check(target: str, device_spec: str, budget: float, runs: int | None, as_json: bool) -> None:
    """Measure BUNDLE_OR_MODEL on a device: exit 0 if the median is within --budget, 1 if not."""
    from nagkit.check import check as run_check

    res = run_check(target, device_spec, budget, runs)
    emit(res.to_dict(), as_json, lambda r: (
        f"{'PASS' if r['passed'] else 'FAIL'}: median {r['median_ms']:.3f} ms "
        f"{'<=' if r['passed'] else '>'} budget {r['budget_ms']:g} ms on {r['device']} "
        f"(p10 {r['latency']['p10_ms']:.3f}, p90 {r['latency']['p90_ms']:.3f}, n={r['latency']['n']}) [{r['model']}]"))
    if not res.passed:
        sys.exit(1)
