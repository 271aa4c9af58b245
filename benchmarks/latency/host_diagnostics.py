"""Two diagnostics for issue 17 on this machine (nothing here is a nagkit feature):

``probe``: can a reference network measured beside the others cancel the host's slow states?
Six of the validation cache's networks (seeded choice) are timed in rounds: the probe (the first),
the five others, the probe again, each a median of 12 invokes. Across rounds, the robust sd of
each network's raw median is set against the sd of its ratio to the probe (the mean of the probe
before and after it), and the ratio in the probe's fastest 30% of rounds against its slowest 30%
(does a slow state slow every network by the same factor?).

``convert``: where one whole-network TFLite conversion spends its time. One network is converted
to warm the imports, a second under cProfile; the cumulative time of litert-torch's stages is
recorded (``torch.export``, its fx passes, the lowering to MLIR and the flatbuffer), and whether
litert-torch's ``use_v2`` converter can run here (it needs a TensorFlow build).

    python benchmarks/latency/host_diagnostics.py --seconds 150   # -> results/host-diagnostics-<date>.json

Run it from a checkout whose validation cache is filled (``bench_cli_path.py --phases prewarm``).
"""

from __future__ import annotations

import argparse
import cProfile
import glob
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CACHE = ROOT / ".cache" / "bench_cli_path" / "cli-path-litert-ofa-mbv3-w1.0-r224" / "cache-validate"


def _rsd(x: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(x - np.median(x))) / np.median(x) * 100)


def time_invokes(it, n: int) -> float:
    """The median of ``n`` timed invokes of a LiteRT interpreter, in ms."""
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        it.invoke()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def probe(seconds: float) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    files = sorted(glob.glob(str(CACHE / "**" / "*.tflite"), recursive=True))
    if len(files) < 6:
        raise SystemExit(f"the validation cache {CACHE} has {len(files)} networks; run bench_cli_path.py --phases prewarm")
    pick = [files[i] for i in np.random.default_rng(0).choice(len(files), 6, replace=False)]
    its = []
    for f in pick:
        it = Interpreter(model_path=f, num_threads=1)
        it.allocate_tensors()
        for _ in range(3):
            it.invoke()
        its.append(it)

    rows, t0 = [], time.time()
    while time.time() - t0 < seconds:
        p0 = time_invokes(its[0], 12)
        others = [time_invokes(it, 12) for it in its[1:]]
        p1 = time_invokes(its[0], 12)
        rows.append([round(time.time() - t0, 3), p0, p1, *others])
    a = np.array(rows)
    pr = (a[:, 1] + a[:, 2]) / 2
    fast, slow = pr <= np.percentile(pr, 30), pr >= np.percentile(pr, 70)
    nets = []
    for j in range(3, a.shape[1]):
        raw, ratio = a[:, j], a[:, j] / pr
        nets.append({"file": Path(pick[j - 2]).name, "raw_median_ms": float(np.median(raw)), "raw_rsd_pct": _rsd(raw),
                     "ratio_median": float(np.median(ratio)), "ratio_rsd_pct": _rsd(ratio),
                     "ratio_fast_rounds": float(np.median(ratio[fast])), "ratio_slow_rounds": float(np.median(ratio[slow])),
                     "slow_vs_fast_ratio_pct": float((np.median(ratio[slow]) / np.median(ratio[fast]) - 1) * 100)})
    return {"rounds": len(rows), "seconds": seconds, "probe": Path(pick[0]).name,
            "probe_ms": {"min": float(pr.min()), "median": float(np.median(pr)), "max": float(pr.max())},
            "probe_before_vs_after_rsd_pct": _rsd(a[:, 1] / a[:, 2]), "networks": nets, "rows": rows}


STAGES = {
    "convert (litert_torch.convert, all)": "_convert/core.py:154(convert_signatures)",
    "torch.export + decompositions (export_torch_signature)": "_convert/core.py:62(export_torch_signature)",
    "litert-torch fx passes (_run_convert_passes)": "_convert/core.py:41(_run_convert_passes)",
    "lowering to MLIR and the flatbuffer (exported_programs_to_flatbuffer)":
        "_convert/litert_converter.py:142(exported_programs_to_flatbuffer)",
    "  of which exported_program_to_mlir": "backend/export.py:321(exported_program_to_mlir)",
    "torch run_decompositions, all calls": "exported_program.py:1514(run_decompositions)",
}


def convert() -> dict:
    from nagkit.latency.validate import random_archs
    from nagkit.runtimes.convert import IO_NAMES, convert_module
    from nagkit.space import get_space
    from nagkit.supernet.static import StaticNet

    sp = get_space("ofa-mbv3-w1.0")
    archs = random_archs(sp, 2, seed=99, resolutions=[224])
    out = {}
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        convert_module(StaticNet.from_arch(sp, archs[0], seed=0), (1, 3, 224, 224), "tflite", Path(d) / "a.tflite",
                       names=IO_NAMES)
        out["first_conversion_with_imports_s"] = round(time.perf_counter() - t, 2)
        net = StaticNet.from_arch(sp, archs[1], seed=0)
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        convert_module(net, (1, 3, 224, 224), "tflite", Path(d) / "b.tflite", names=IO_NAMES)
        prof.disable()
        out["second_conversion_under_cprofile_s"] = round(time.perf_counter() - t, 2)
    stats = pstats.Stats(prof).stats  # {(file, line, fn): (cc, nc, tt, ct, callers)}
    stages = {}
    for label, tail in STAGES.items():
        ct = [v[3] for (f, line, fn), v in stats.items() if f"{f}:{line}({fn})".endswith(tail)]
        stages[label] = round(sum(ct), 2) if ct else None
    out["stages_cumulative_s"] = stages
    out["archs"] = [str(a) for a in archs]
    try:
        from litert_torch._convert import converter_v2

        out["use_v2_supported_here"] = bool(converter_v2.is_supported())
    except ImportError as e:  # pragma: no cover - depends on the litert-torch version
        out["use_v2_supported_here"] = f"not importable: {e}"
    return out


def main() -> int:
    from bench_cpu import LoadSampler, machine_info

    from nagkit.io import atomic_write_json
    from nagkit.latency.table import utc_now

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=150.0, help="how long the probe experiment runs")
    ap.add_argument("--parts", default="probe,convert")
    args = ap.parse_args()
    res = {"benchmark": "host_diagnostics", "machine": machine_info(), "when": utc_now(), "argv": sys.argv[1:]}
    for part in args.parts.split(","):
        with LoadSampler() as load:
            t = time.perf_counter()
            res[part] = {"probe": lambda: probe(args.seconds), "convert": convert}[part]()
            res[part]["wall_s"] = round(time.perf_counter() - t, 1)
        res[part]["load"] = load.summary()
    out = Path(__file__).resolve().parent / "results" / f"host-diagnostics-{time.strftime('%Y-%m-%d')}.json"
    atomic_write_json(out, res)
    print(json.dumps({k: v for k, v in res.get("probe", {}).items() if k not in ("rows",)}, indent=1)[:3000])
    print(json.dumps(res.get("convert", {}), indent=1))
    print("->", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
