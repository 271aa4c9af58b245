"""Benchmark (issue 17): the table a user gets from the command line alone, checked with two timers.

What a new user runs, nothing else: no pinning, no nice, the device profile as shipped,
the default calibration count::

    nagkit profile --device device_profiles/cpu-<runtime>-1t.yaml --space ofa-mbv3-w1.0 \\
        --resolutions 224 --calibrate --out T.json --cache-dir C     # C empty: cold
    nagkit lut validate --lut T.json --device <same> --samples 100 --seed 17 --cache-dir C --json

then, as the independent second timer, a plain interpreter (LiteRT ``Interpreter`` or ONNX
Runtime ``InferenceSession``, 1 thread, in this process, no nagkit measuring code) times the same
100 exported files: 3 interleaved passes over the list, each network ``--plain-runs`` timed runs
after 3 warm-up runs, ``set_tensor`` + ``invoke`` + ``get_tensor`` per run (what an application
does) and ``invoke`` alone, both recorded. Reported per network: the best of the 3 pass
medians (the protocol of the issue) and their median (nagkit's rule), and the first invoke.

The files timed are the conversion cache's: the same converter, graph, inputs, signature and
tensor shapes as what ``nagkit export --random-init --seed 0`` writes, which also carries the
model metadata of decisions 20, so the bytes differ (decisions 19; ``tests/latency/test_ships.py``).
The script re-exports ``--export-check`` of them with ``nagkit export`` and records both: the
sha256 match (false: the metadata) and the graph match (``nagkit.runtimes.graph.model_graph``
with constants: signatures, io, every operator with its options and the shape, type and bytes
of every tensor it reads or writes for TFLite; io, operators, opsets and initializers for ONNX).

Targets (issue 17 acceptance): validate ≥ 95% within ±5%; the plain timer agrees with the table
≥ 90% within ±5%; profile + calibration ≤ 10 min cold on the 2-core CPU. The load average is
sampled throughout and recorded: a number from a busy machine is kept, and marked so.

    python benchmarks/latency/bench_cli_path.py --runtime litert            # cold, 100 networks
    python benchmarks/latency/bench_cli_path.py --runtime onnxruntime
    python benchmarks/latency/bench_cli_path.py --runtime litert --samples 20 --tag=-smoke
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PROFILES = {"litert": "cpu-litert-1t", "onnxruntime": "cpu-onnxruntime-1t"}
FORMATS = {"litert": "tflite", "onnxruntime": "onnx"}


# -- the second timer ---------------------------------------------------------------------------
class PlainLiteRT:
    """A plain LiteRT interpreter, as an application would open one (1 thread)."""

    def __init__(self, path: Path, threads: int = 1):
        from ai_edge_litert.interpreter import Interpreter

        self.it = Interpreter(model_path=str(path), num_threads=threads)
        self.it.allocate_tensors()
        self.inp = self.it.get_input_details()[0]
        self.out = self.it.get_output_details()[0]
        self.x = np.random.default_rng(0).standard_normal(self.inp["shape"]).astype(np.float32)

    def run_io(self) -> None:
        self.it.set_tensor(self.inp["index"], self.x)
        self.it.invoke()
        self.it.get_tensor(self.out["index"])

    def run_invoke(self) -> None:
        self.it.invoke()


class PlainORT:
    """A plain ONNX Runtime session (1 intra-op thread, 1 inter-op thread)."""

    def __init__(self, path: Path, threads: int = 1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        self.s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        i = self.s.get_inputs()[0]
        self.name = i.name
        self.x = np.random.default_rng(0).standard_normal([int(d) for d in i.shape]).astype(np.float32)

    def run_io(self) -> None:
        self.s.run(None, {self.name: self.x})

    run_invoke = run_io  # ONNX Runtime has no separate invoke: a run copies in and out


def plain_pass(runner_cls, paths: list[Path], runs: int) -> list[dict]:
    """One pass over ``paths``: per file, the first invoke, then 3 warm-up runs, then ``runs``
    timed runs alternating io-inclusive and invoke-only (ms)."""
    out = []
    for p in paths:
        r = runner_cls(p)
        t0 = time.perf_counter()
        r.run_io()
        first = (time.perf_counter() - t0) * 1e3
        for _ in range(3):
            r.run_io()
        io, inv = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            r.run_io()
            t1 = time.perf_counter()
            r.run_invoke()
            t2 = time.perf_counter()
            io.append((t1 - t0) * 1e3)
            inv.append((t2 - t1) * 1e3)
        out.append({"first_ms": first, "io_median_ms": float(np.median(io)), "invoke_median_ms": float(np.median(inv))})
        del r
    return out


def plain_timings(runtime: str, paths: list[Path], passes: int = 3, runs: int = 30) -> list[dict]:
    """Per file: pass medians (io-inclusive and invoke-only), best and median over passes."""
    cls = PlainLiteRT if runtime == "litert" else PlainORT
    per = [plain_pass(cls, paths, runs) for _ in range(passes)]
    rows = []
    for i in range(len(paths)):
        io = [per[k][i]["io_median_ms"] for k in range(passes)]
        inv = [per[k][i]["invoke_median_ms"] for k in range(passes)]
        rows.append({"io_pass_medians_ms": io, "invoke_pass_medians_ms": inv,
                     "io_best_ms": min(io), "io_median_ms": float(np.median(io)),
                     "invoke_best_ms": min(inv), "invoke_median_ms": float(np.median(inv)),
                     "first_invoke_ms": [per[k][i]["first_ms"] for k in range(passes)]})
    return rows


# -- helpers ------------------------------------------------------------------------------------
def run_nagkit(args: list[str], env: dict) -> tuple[dict, float, str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "nagkit", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"nagkit {' '.join(args[:2])} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout), wall, p.stderr


def within(pred: np.ndarray, meas: np.ndarray) -> dict:
    err = (pred - meas) / meas * 100
    return {"mape": float(np.abs(err).mean()), "within_5pct": float(np.mean(np.abs(err) <= 5)),
            "within_10pct": float(np.mean(np.abs(err) <= 10)), "mean_signed_error_pct": float(err.mean()),
            "max_abs_error_pct": float(np.abs(err).max())}


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", choices=sorted(PROFILES), default="litert")
    ap.add_argument("--space", default="ofa-mbv3-w1.0")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--samples", type=int, default=100, help="validation networks (lut validate --samples)")
    ap.add_argument("--seed", type=int, default=17, help="validation seed (not the shipped tables' 0 or 1)")
    ap.add_argument("--calibrate", default="", help="N for --calibrate (default: none, i.e. the default count)")
    ap.add_argument("--work", default=str(ROOT / ".cache" / "bench_cli_path"), help="table and caches go here")
    ap.add_argument("--warm", action="store_true", help="keep the conversion cache (default: emptied, cold)")
    ap.add_argument("--phases", default="profile,validate,plain",
                    help="comma-separated: prewarm, profile, validate, plain. prewarm converts the validation "
                         "networks into their own cache (cache-validate/), which validate and plain use: run it "
                         "first, separately, so the quiet time goes to measuring (no timing target covers it)")
    ap.add_argument("--plain-runs", type=int, default=30, help="timed runs per network per pass (plain timer)")
    ap.add_argument("--export-check", type=int, default=2, help="re-export this many networks with nagkit export")
    ap.add_argument("--results-dir", default=str(ROOT / "benchmarks" / "latency" / "results"))
    ap.add_argument("--table", default=None,
                    help="with --phases validate,plain: check this existing table (e.g. a shipped one) instead of "
                         "the one the profile phase writes")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)

    from bench_cpu import LoadSampler, busy_processes, machine_info

    from nagkit.io import atomic_write_json
    from nagkit.latency.table import LatencyTable, utc_now
    from nagkit.latency.validate import NetworkCache, random_archs
    from nagkit.runtimes.graph import model_graph
    from nagkit.space import get_space

    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    space = get_space(args.space)
    name = f"cli-path-{args.runtime}-{space.name}-r{args.resolution}{args.tag}"
    work = Path(args.work) / name
    cache = work / "cache"  # the profile's: emptied unless --warm (cold)
    vcache = work / "cache-validate"  # the validation networks' (see --phases prewarm)
    table_path = Path(args.table).resolve() if args.table else work / "table.json"
    if args.table and "profile" in args.phases:
        raise SystemExit("--table is for --phases validate,plain (the profile phase writes its own table)")
    result_path = Path(args.results_dir) / f"{name}.json"
    report = json.loads(result_path.read_text()) if result_path.exists() else {}
    report.update({"benchmark": "latency/bench_cli_path.py", "space": space.name, "resolution": args.resolution,
                   "runtime": args.runtime, "device_profile": f"device_profiles/{PROFILES[args.runtime]}.yaml",
                   "machine": machine_info(), "argv": sys.argv[1:], "updated": utc_now(),
                   "loadavg_at_start": os.getloadavg()})
    report.setdefault("phases", {})
    report["table"] = str(table_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    device = str(ROOT / "nagkit" / "resources" / "device_profiles" / f"{PROFILES[args.runtime]}.yaml")

    if "profile" in phases:
        if not args.warm and cache.exists():
            shutil.rmtree(cache)
        work.mkdir(parents=True, exist_ok=True)
        cmd = ["profile", "--device", device, "--space", space.name, "--resolutions", str(args.resolution),
               "--out", str(table_path), "--force", "--cache-dir", str(cache), "--no-progress", "--json",
               "--calibrate", *([args.calibrate] if args.calibrate else [])]
        before = busy_processes()
        with LoadSampler() as load:
            out, wall, err = run_nagkit(cmd, env)
        fid = out.get("fidelity") or {}
        report["phases"]["profile"] = {
            "command": "nagkit " + " ".join(cmd), "cold": not args.warm, "wall_s": round(wall, 1),
            "target_s": 600, "meets_target": wall <= 600, "blocks": out["entries"],
            "block_profile_s": out.get("elapsed_s"), "calibration": fid, "load": load.summary(),
            "busy_processes_at_start": before, "stderr_tail": err[-1500:], "when": utc_now()}
        print(f"profile + calibration: {wall:.0f} s ({'cold' if not args.warm else 'warm'}); "
              f"load1 mean {load.summary()['load1_mean']:.2f}", file=sys.stderr)

    archs = random_archs(space, args.samples, args.seed, [args.resolution])
    if "prewarm" in phases:
        from nagkit.latency.validate import NetworkCache as _NC

        t0 = time.perf_counter()
        _NC(FORMATS[args.runtime], vcache).prepare(space, archs, progress=True)
        report["phases"]["prewarm"] = {
            "what": f"the {args.samples} validation networks (seed {args.seed}) converted into {vcache}, which "
                    "validate and plain read; not part of any timing target", "wall_s": round(time.perf_counter() - t0, 1),
            "when": utc_now()}
    if "validate" in phases:
        cmd = ["lut", "validate", "--lut", str(table_path), "--device", device, "--samples", str(args.samples),
               "--seed", str(args.seed), "--cache-dir", str(vcache), "--no-progress", "--json"]
        with LoadSampler() as load:
            rep, wall, _ = run_nagkit(cmd, env)
        main_m = rep["calibrated"] or rep["raw"]
        report["phases"]["validate"] = {
            "command": "nagkit " + " ".join(cmd), "wall_s": round(wall, 1), "n": args.samples, "seed": args.seed,
            "raw": rep["raw"], "calibrated": rep["calibrated"], "noise": rep.get("noise"), "level": rep.get("level"),
            "verdict": rep.get("verdict"), "target": "≥95% within ±5%", "meets_target": main_m["within_5pct"] >= 0.95,
            "load": load.summary(), "archs": rep["archs"], "when": utc_now()}
        print(f"validate ({args.samples} networks, seed {args.seed}): {main_m['within_5pct']:.0%} within ±5%, "
              f"MAPE {main_m['mape']:.2f}%", file=sys.stderr)

    if "plain" in phases:
        nc = NetworkCache(FORMATS[args.runtime], vcache)
        nc.prepare(space, archs, progress=False)  # no-op after validate (same cache)
        paths = [nc.path_for(space, a) for a in archs]
        checks = []
        for a, p in list(zip(archs, paths))[:args.export_check]:  # the cache's files are what export writes
            d = work / "export" / str(a)
            subprocess.run([sys.executable, "-m", "nagkit", "export", "--random-init", "--seed", "0", "--space",
                            space.name, "--arch", str(a), "--format", FORMATS[args.runtime], "--out", str(d),
                            "--force", "-q"], env=env, cwd=ROOT, check=True, capture_output=True)
            exported = d / f"model.{FORMATS[args.runtime]}"
            checks.append({"arch": str(a), "same_sha256": sha(exported) == sha(p),
                           "same_graph": model_graph(exported, constants=True) == model_graph(p, constants=True)})
        with LoadSampler() as load:
            t0 = time.perf_counter()
            rows = plain_timings(args.runtime, paths, runs=args.plain_runs)
            wall = time.perf_counter() - t0
        table = LatencyTable.load(table_path)
        pred = table.predict_many(space, archs)
        io_best = np.array([r["io_best_ms"] for r in rows])
        res = {"protocol": "plain interpreter, 1 thread, 3 interleaved passes, 3 warm-up + "
                           f"{args.plain_runs} timed runs per network per pass",
               "export_check": checks, "wall_s": round(wall, 1), "load": load.summary(), "when": utc_now(),
               "table_vs_plain": {
                   "io_best_of_3 (issue protocol)": within(pred, io_best),
                   "io_median_of_3": within(pred, np.array([r["io_median_ms"] for r in rows])),
                   "invoke_best_of_3": within(pred, np.array([r["invoke_best_ms"] for r in rows])),
                   "invoke_median_of_3": within(pred, np.array([r["invoke_median_ms"] for r in rows]))},
               "target": "≥90% within ±5% (io, best of 3)",
               "meets_target": within(pred, io_best)["within_5pct"] >= 0.90}
        v = report["phases"].get("validate")
        if v and [r["arch"] for r in v["archs"]] == [str(a) for a in archs]:
            nag = np.array([r["measured_ms"] for r in v["archs"]])
            res["nagkit_vs_plain"] = {  # positive: nagkit's timer reads higher than the plain one
                "io_best_of_3": within(nag, io_best),
                "invoke_median_of_3": within(nag, np.array([r["invoke_median_ms"] for r in rows]))}
        res["archs"] = [{"arch": str(a), "predicted_ms": float(p), **r} for a, p, r in zip(archs, pred, rows)]
        report["phases"]["plain"] = res
        t = res["table_vs_plain"]["io_best_of_3 (issue protocol)"]
        print(f"plain timer vs table: {t['within_5pct']:.0%} within ±5%, MAPE {t['mape']:.2f}%, "
              f"bias {t['mean_signed_error_pct']:+.2f}%", file=sys.stderr)

    report["loadavg_at_end"] = os.getloadavg()
    report["quiet"] = all(p.get("load", {}).get("load1_max", 99) <= 1.5 for k, p in report["phases"].items()
                          if k != "prewarm")
    atomic_write_json(result_path, report)
    print(f"-> {result_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
