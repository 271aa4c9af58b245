"""The Python API: what the four front-door commands do, as functions (``import nagkit``).

``nagkit.profile``, ``nagkit.build``, ``nagkit.generate`` and ``nagkit.check`` take the
options the commands take, return result objects instead of printing, and raise
:class:`nagkit.errors.NagkitError` subclasses (``exit_code`` says which: 1 a check failed, 2 bad
input, 3 device or runtime) instead of exiting. Nothing here starts a process through
``multiprocessing``: conversion and CPU timing workers are started with ``python -m``, so a
script that calls these at its top level needs no ``if __name__ == "__main__":`` guard, also
under the ``spawn`` start method.

Example (the README's, run by tests/test_api.py)::

    import nagkit

    for r in nagkit.generate([1.5, 3.0]):          # the default workspace; zero accuracy queries
        print(f"{r.budget_ms} ms: {r.best.arch} ({r.best.latency_ms:.3f} ms on the table)")
    b = nagkit.build(3.0, device="cpu", out="out/api-3ms", force=True)
    gate = nagkit.check(b.bundle, device="cpu", budget_ms=3.0)
    print(b.bundle, "PASS" if gate.passed else "FAIL", f"{gate.stats.median_ms:.3f} ms")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build", "check", "generate", "profile"]


def profile(device: Any, *, space: str | None = None, resolutions: Sequence[int] | None = None,
            out: str | Path | None = None, benchmark_binary: str | None = None, resume: bool = False,
            force: bool = False, calibrate: int = 0, cache_dir: str | Path | None = None, jobs: int | None = None,
            progress: bool = False, precision: str = "fp32", block_passes: int | None = None,
            time_budget: float | str | None = "default"):
    """Measure ``device`` (a spec such as ``"adb:SERIAL"`` or ``"cpu"``, a profile, or an open
    device) block by block into a latency table, as ``nagkit profile`` does: the device is
    checked first, a phone measures while the host converts; ``precision="int8"`` times every
    block quantized (an int8 table); ``block_passes``: passes over the blocks, the best of each
    recorded (default 3 on this machine's CPU, 1 on a phone); ``time_budget``: seconds or text
    such as ``"10m"`` (default: the device's own, 10 minutes on this machine's CPU, none on a
    phone or GPU; ``"none"``: no budget), planned before any conversion and refused when below
    the minimum. Returns the
    :class:`~nagkit.latency.profiler.ProfileResult` (``.out`` the table's path, ``.table``)."""
    from nagkit.app.profile import ProfileOptions, run_profile

    result, _, _ = run_profile(device, ProfileOptions(
        space=space, resolutions=resolutions, out=out, benchmark_binary=benchmark_binary, resume=resume, force=force,
        cache_dir=cache_dir, jobs=jobs, progress=progress, calibrate=calibrate, precision=precision,
        block_passes=block_passes, command="nagkit.profile()", time_budget=time_budget))
    return result


def build(budget_ms: float, *, workspace: Any = None, device: Any = None, export: str = "tflite",
          out: str | Path | None = None, force: bool = False, weights: str | None = None, random_init: bool = False,
          finetune: int = 0, max_tries: int = 3, samples: int | None = None, seed: int = 0,
          accuracy: str = "auto", max_int8_drop: float = 1.0, quantize_after: bool = False,
          max_params: float | str | None = None, max_size_mb: float | None = None,
          max_macs: float | str | None = None, max_peak_kb: float | None = None):
    """The most accurate model for ``budget_ms`` as a verified bundle, as ``nagkit build`` does
    (``device``: a spec string or an open device; without one the bundle is unverified).
    ``max_params``, ``max_size_mb``, ``max_macs``, ``max_peak_kb``: further limits, met by every
    generated arch (counts may be text such as ``"2.5M"``; MB and kB are 10^6 and 10^3 bytes).
    Returns the :class:`~nagkit.app.build.BuildResult` (``.bundle``, ``.measured``, ``.note``,
    ``.constraints``...)."""
    from nagkit.app.build import BuildOptions
    from nagkit.app.build import build as run
    from nagkit.nag.constraints import Limits

    limits = Limits.parse(max_params=max_params, max_size_mb=max_size_mb, max_macs=max_macs, max_peak_kb=max_peak_kb)
    opts = BuildOptions(device_spec=device if isinstance(device, str) else None, formats=export, out=out,
                        force=force, weights=weights, random_init=random_init, finetune=finetune,
                        max_tries=max_tries, samples=samples, seed=seed, accuracy=accuracy,
                        max_int8_drop=max_int8_drop, quantize_after=quantize_after, limits=limits)
    return run(budget_ms, workspace=workspace, options=opts, device=None if isinstance(device, str) else device)


def generate(budgets: float | Sequence[float], *, workspace: Any = None, samples: int | None = None, seed: int = 0,
             top: int = 10, search_queries: int | None = None, accuracy: bool = True,
             max_params: float | str | None = None, max_size_mb: float | None = None,
             max_macs: float | str | None = None, max_peak_kb: float | None = None) -> list:
    """The best architectures for each budget, as ``nagkit generate`` does: one
    :class:`~nagkit.nag.infer.BudgetResult` per budget (``.best.arch``, ``.best.latency_ms``,
    ``.candidates``); ``accuracy=False`` skips the display-only accuracy lookup. ``max_params``,
    ``max_size_mb`` (a TFLite file at the table's precision), ``max_macs``, ``max_peak_kb``:
    further limits every sample meets (``.extra["constraints"]`` says what binds)."""
    from nagkit.app.nag import generate as run
    from nagkit.nag.constraints import Limits

    limits = Limits.parse(max_params=max_params, max_size_mb=max_size_mb, max_macs=max_macs, max_peak_kb=max_peak_kb)
    values = [float(budgets)] if isinstance(budgets, (int, float)) else [float(b) for b in budgets]
    return run(workspace, values, samples=samples, seed=seed, top=top, search_queries=search_queries,
               display=accuracy, limits=limits)


def check(model: str | Path, *, device: str, budget_ms: float, runs: int | None = None):
    """Measure a bundle or model on ``device`` against ``budget_ms``, as ``nagkit check`` does.
    Returns the :class:`~nagkit.app.check.CheckResult` (``.passed``, ``.stats.median_ms``); over
    budget is a result, not an exception (``.raise_if_failed()`` raises it)."""
    from nagkit.app.check import check as run

    return run(model, device, budget_ms, runs)
