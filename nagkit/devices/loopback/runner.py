"""A ``benchmark_model`` stand-in for the loopback device (a mock of the phone's binary).

It runs the ``.tflite`` with LiteRT (``ai_edge_litert``) on this host's CPU and prints what
TensorFlow Lite's ``benchmark_model`` (2.x, ``INFO:`` style) prints, so the same parser reads
it. Flags: ``--graph``, ``--num_threads``, ``--num_runs``, ``--min_secs``, ``--max_secs``,
``--warmup_runs``, ``--warmup_min_secs``, ``--use_xnnpack``, ``--seed``; unknown flags are
reported the way the real tool does and ignored. The sandbox's ``time_scale`` (see
``Sandbox.set_time_scale``) scales the seconds it spends.
"""

from __future__ import annotations

import os
import resource
import sys
import time


def _flags(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    known = {"graph", "num_threads", "num_runs", "min_secs", "max_secs", "warmup_runs", "warmup_min_secs",
             "use_xnnpack", "seed", "enable_op_profiling"}
    flags, unknown = {}, []
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            key, val = arg[2:].split("=", 1)
            if key in known:
                flags[key] = val
                continue
        unknown.append(arg)
    return flags, unknown


def _fmt(x: float) -> str:
    return f"{x:g}"  # C++ ostream default: 6 significant digits (avg=2.95034e+06)


def _count_line(samples_us: list[int], with_first: bool = True) -> str:
    import numpy as np

    s = np.asarray(samples_us, dtype=np.float64)
    parts = [f"count={len(samples_us)}"]
    if len(samples_us) > 1 and with_first:
        parts += [f"first={samples_us[0]}", f"curr={samples_us[-1]}", f"min={int(s.min())}", f"max={int(s.max())}",
                  f"avg={_fmt(float(s.mean()))}", f"std={int(round(float(s.std())))}"]
    else:
        parts.append(f"curr={samples_us[-1]}")
    p5, p50, p95 = (int(round(v)) for v in np.percentile(s, [5, 50, 95], method="nearest"))
    parts += [f"p5={p5}", f"median={p50}", f"p95={p95}"]
    return " ".join(parts)


def _phase(interp, min_runs: int, min_secs: float, max_secs: float) -> list[int]:
    samples: list[int] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter_ns()
        interp.invoke()
        samples.append((time.perf_counter_ns() - t0) // 1000)
        elapsed = time.perf_counter() - start
        if (len(samples) >= min_runs and elapsed >= min_secs) or elapsed >= max_secs:
            return samples


def _time_scale() -> float:
    root = os.environ.get("NAGKIT_LOOPBACK_SANDBOX")
    try:
        with open(os.path.join(root, ".nagkit-loopback", "time_scale")) as f:
            return float(f.read().strip())
    except (TypeError, OSError, ValueError):
        return 1.0


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = sys.stdout
    flags, unknown = _flags(argv)
    print("INFO: STARTING!", file=out)
    if unknown:
        print(f"ERROR: Unconsumed cmdline flags: {' '.join(unknown)}", file=out)
    graph = flags.get("graph", "")
    threads = int(flags.get("num_threads", "-1"))
    num_runs = int(flags.get("num_runs", "50"))
    min_secs = float(flags.get("min_secs", "1"))
    max_secs = float(flags.get("max_secs", "150"))
    warm_runs = int(flags.get("warmup_runs", "1"))
    warm_secs = float(flags.get("warmup_min_secs", "0.5"))
    scale = _time_scale()  # the sandbox may ask for a quicker stand-in (Sandbox.set_time_scale)
    min_secs, warm_secs = min_secs * scale, warm_secs * scale
    seed = int(flags.get("seed", "0"))
    use_xnnpack = flags.get("use_xnnpack", "true").lower() not in ("false", "0")
    print("INFO: Log parameter values verbosely: [0]", file=out)
    print(f"INFO: Min num runs: [{num_runs}]", file=out)
    print(f"INFO: Num threads: [{threads}]", file=out)
    print(f"INFO: Graph: [{graph}]", file=out)
    print(f"INFO: #threads used for CPU inference: [{threads}]", file=out)
    print(f"INFO: Use xnnpack: [{int(use_xnnpack)}]", file=out)
    print("INFO: Benchmark runner: [nagkit loopback stand-in, LiteRT on the host CPU]", file=out)
    if not graph or not os.path.isfile(graph):
        print(f"ERROR: Could not open '{graph}'.", file=out)
        print(f"ERROR: Failed to mmap model {graph}", file=out)
        print("ERROR: Benchmarking failed.", file=out)
        return 1
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    rss0 = _rss_mb()
    t0 = time.perf_counter()
    kwargs = {"num_threads": threads if threads > 0 else None}
    if not use_xnnpack:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        interp = Interpreter(model_path=graph, **kwargs)
        interp.allocate_tensors()
    except Exception as e:  # noqa: BLE001 - report as the real tool does
        print(f"ERROR: Failed to allocate tensors! ({e})", file=out)
        print("ERROR: Benchmarking failed.", file=out)
        return 1
    print(f"INFO: Loaded model {graph}", file=out)
    if use_xnnpack:
        print("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.", file=out)
    print(f"INFO: The input model file size (MB): {_fmt(os.path.getsize(graph) / 1e6)}", file=out)
    rng = np.random.default_rng(seed)
    for d in interp.get_input_details():
        shape, dtype = d["shape"], d["dtype"]
        if np.issubdtype(dtype, np.floating):
            data = rng.standard_normal(shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            data = rng.integers(max(info.min, -128), min(info.max, 127), size=shape, endpoint=True).astype(dtype)
        interp.set_tensor(d["index"], data)
    init_us = int((time.perf_counter() - t0) * 1e6)
    rss_init = _rss_mb()
    print(f"INFO: Initialized session in {init_us / 1000:.3f}ms.", file=out)
    print(f"INFO: Running benchmark for at least {warm_runs} iterations and at least {_fmt(warm_secs)} seconds "
          f"but terminate if exceeding {_fmt(max_secs)} seconds.", file=out)
    warm = _phase(interp, max(warm_runs, 1), warm_secs, max_secs)
    print(f"INFO: {_count_line(warm)}", file=out)
    print("", file=out)
    print(f"INFO: Running benchmark for at least {num_runs} iterations and at least {_fmt(min_secs)} seconds "
          f"but terminate if exceeding {_fmt(max_secs)} seconds.", file=out)
    runs = _phase(interp, max(num_runs, 1), min_secs, max_secs)
    print(f"INFO: {_count_line(runs)}", file=out)
    print("", file=out)
    print(f"INFO: Inference timings in us: Init: {init_us}, First inference: {warm[0]}, "
          f"Warmup (avg): {_fmt(sum(warm) / len(warm))}, Inference (avg): {_fmt(sum(runs) / len(runs))}", file=out)
    print("INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE "
          "to the actual memory footprint of the model at runtime. Take the information at your discretion.",
          file=out)
    print(f"INFO: Memory footprint delta from the start of the tool (MB): init={_fmt(rss_init - rss0)} "
          f"overall={_fmt(_rss_mb() - rss0)}", file=out)
    out.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
