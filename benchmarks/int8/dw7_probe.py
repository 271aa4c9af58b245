"""Where the int8 7×7 depthwise cliff of decisions 25 comes from (issue 14): one depthwise
convolution alone, converted as nagkit converts an int8 block, timed in LiteRT.

    python benchmarks/int8/dw7_probe.py [--passes 3] [--runs 100]

For each shape (channels C, input H×H, kernel k; stride 1, 'same' padding, no bias), five files
or runtimes, timed on this CPU with a plain LiteRT interpreter (1 thread, 5 warm-up runs, then
``--runs`` timed ``invoke`` calls), in ``--passes`` interleaved passes:

- ``int8``: nagkit's int8 path (``convert_module(..., precision="int8")``: PT2E, weights per
  channel, int8 input and output), run with LiteRT's default XNNPACK delegate;
- ``int8-per-tensor``: the same with the weights quantized per tensor;
- ``int8-builtin``: the ``int8`` file with XNNPACK off (LiteRT's builtin kernels);
- ``fp32``: nagkit's fp32 conversion, with XNNPACK.

Reported per file: every pass's p5 / median / p95 in ms, the best pass median (nagkit's rule), and
the spread of the pass medians. Writes ``results/dw7_probe.json`` (machine info, load averages).
Nothing here is a nagkit feature; it explains a runtime's behaviour that nagkit's int8 table has
to live with.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "latency"))

SHAPES = [(480, 2, 7), (480, 2, 5), (480, 2, 3), (96, 2, 7), (96, 14, 7), (96, 14, 5), (480, 7, 7)]


def per_tensor_int8(module, example, calibration, path: Path) -> None:
    """As ``to_tflite_int8`` but with per-tensor weights (a variant for this probe only)."""
    import litert_torch
    import torch
    from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
    from litert_torch.quantize.quant_config import QuantConfig
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    q = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=False))
    observed = prepare_pt2e(torch.export.export(module, (example,)).module(), q)
    with torch.no_grad():
        for x in calibration:
            observed(torch.from_numpy(x[None]))
    litert_torch.convert(convert_pt2e(observed, fold_quantize=False), (example,),
                         quant_config=QuantConfig(pt2e_quantizer=q)).export(str(path))


def interpreter(path: Path, builtin: bool):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kw = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES} if builtin else {}
    it = Interpreter(model_path=str(path), num_threads=1, **kw)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(d["shape"]).astype(np.float32) if d["dtype"] == np.float32
         else rng.integers(-20, 20, size=d["shape"]).astype(d["dtype"]))
    it.set_tensor(d["index"], x)
    return it


def time_once(it, runs: int) -> list[float]:
    for _ in range(5):
        it.invoke()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        it.invoke()
        ts.append((time.perf_counter() - t) * 1e3)
    return ts


def main(argv=None) -> int:
    import torch

    from bench_cpu import machine_info
    from nagkit.io import atomic_write_json
    from nagkit.latency.table import utc_now
    from nagkit.runtimes.convert import convert_module

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "int8" / "results" / "dw7_probe.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    tmp = Path(tempfile.mkdtemp(prefix="dw7-"))
    files = {}  # (shape, variant) -> (path, builtin)
    t0 = time.perf_counter()
    for c, h, k in SHAPES:
        torch.manual_seed(0)
        m = torch.nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False).eval()
        tag = f"C{c}-H{h}-k{k}"
        convert_module(m, (1, c, h, h), "tflite", tmp / f"{tag}-int8.tflite", precision="int8")
        example = torch.randn(1, c, h, h, generator=torch.Generator().manual_seed(0))
        cal = torch.randn(4, c, h, h, generator=torch.Generator().manual_seed(1)).numpy()
        per_tensor_int8(m, example, cal, tmp / f"{tag}-int8-per-tensor.tflite")
        convert_module(m, (1, c, h, h), "tflite", tmp / f"{tag}-fp32.tflite")
        files[(tag, "int8")] = (tmp / f"{tag}-int8.tflite", False)
        files[(tag, "int8-per-tensor")] = (tmp / f"{tag}-int8-per-tensor.tflite", False)
        files[(tag, "int8-builtin")] = (tmp / f"{tag}-int8.tflite", True)
        files[(tag, "fp32")] = (tmp / f"{tag}-fp32.tflite", False)
    convert_s = time.perf_counter() - t0

    load = [os.getloadavg()]
    passes: dict = {key: [] for key in files}
    t0 = time.perf_counter()
    for _ in range(args.passes):
        for key, (path, builtin) in files.items():
            ts = time_once(interpreter(path, builtin), args.runs)
            passes[key].append([float(v) for v in np.percentile(ts, [5, 50, 95])])
        load.append(os.getloadavg())
    time_s = time.perf_counter() - t0

    rows = []
    for (tag, variant), ps in passes.items():
        meds = [p[1] for p in ps]
        rows.append({"shape": tag, "variant": variant, "passes_p5_median_p95_ms": ps,
                     "best_pass_median_ms": min(meds),
                     "pass_median_spread_pct": 100 * (max(meds) - min(meds)) / min(meds)})
        print(f"{tag:14s} {variant:16s} best median {min(meds):8.4f} ms  pass medians "
              + " ".join(f"{v:.4f}" for v in meds), file=sys.stderr)
    atomic_write_json(Path(args.out), {
        "benchmark": "int8/dw7_probe.py", "argv": sys.argv[1:], "machine": machine_info(), "when": utc_now(),
        "protocol": f"plain LiteRT interpreter, 1 thread, 5 warm-up + {args.runs} timed invoke calls per file "
                    f"per pass, {args.passes} interleaved passes, a fresh interpreter each pass",
        "convert_s": round(convert_s, 1), "time_s": round(time_s, 1), "loadavg": load, "rows": rows})
    print(f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
