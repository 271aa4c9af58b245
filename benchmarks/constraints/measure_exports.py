"""What nagkit's resource estimates say against exported files (issue 34, decisions 39).

    python benchmarks/constraints/measure_exports.py [--n 24] [--ofa 4] [--int8 6]

For ``--n`` random archs of the default workspace's space (``fmnist-mbv3-w0.5``, spread over its
resolutions, plus its smallest and largest) and ``--ofa`` of ``ofa-mbv3-w1.0``, the subnet (random
weights: sizes and shapes do not depend on their values) is exported as nagkit's bundles write
it (tensors ``image``/``logits``, the model metadata inside) to TFLite fp32, ONNX fp32 and TFLite
fp16, and for the first ``--int8`` fmnist archs to TFLite int8 (random calibration inputs). For
each file it records the size, and for each .tflite the activation memory measured from the file
(:func:`nagkit.runtimes.memory.tflite_activation_memory`: live-tensor peak and LiteRT's arena),
beside nagkit's estimates: ``space.params``, ``space.peak_activation`` x bytes per element.
Resumable: every finished arch is appended to ``results/exports.partial.jsonl``; the summary
goes to ``results/exports.json`` with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "constraints" / "results"


def plan(n: int, n_ofa: int, n_int8: int) -> list[dict]:
    from nagkit.space import get_space, sample_many

    jobs = []
    for name, count in (("fmnist-mbv3-w0.5", n), ("ofa-mbv3-w1.0", n_ofa)):
        if count <= 0:
            continue
        sp = get_space(name)
        archs = sample_many(sp, max(count - 2, 0), seed=34) + [sp.smallest(), sp.largest()]
        for i, a in enumerate(archs[:count]):
            jobs.append({"space": name, "arch": str(a), "int8": name.startswith("fmnist") and i < n_int8})
    return jobs


def export_one(job: dict, where: Path) -> dict:
    import numpy as np
    import torch

    from nagkit.export.manifest import model_metadata
    from nagkit.runtimes.convert import IO_NAMES, to_onnx, to_tflite, to_tflite_fp16, to_tflite_int8
    from nagkit.runtimes.memory import tflite_activation_memory
    from nagkit.space import get_space
    from nagkit.supernet import OFAMobileNetV3

    sp = get_space(job["space"])
    arch = sp.parse_arch(job["arch"])
    torch.manual_seed(0)
    sub = OFAMobileNetV3(sp).eval().extract(arch).eval()
    shape = (1, sp.in_channels, arch.r, arch.r)
    x = torch.zeros(shape)
    names = ("image", "logits")
    rec = {**job, "r": arch.r, "params": sp.params(arch), "macs": sp.macs(arch),
           "peak_elements": sp.peak_activation(arch), "files": {}}
    convs = {"tflite-fp32": lambda p, m: to_tflite(sub, x, p, names=names, metadata=m),
             "onnx-fp32": lambda p, m: to_onnx(sub, x, p, names=names, metadata=m),
             "tflite-fp16": lambda p, m: to_tflite_fp16(sub, x, p, names=names, metadata=m)}
    if job["int8"]:
        cal = np.random.default_rng(0).standard_normal((8, *shape[1:])).astype(np.float32)
        convs["tflite-int8"] = lambda p, m: to_tflite_int8(sub, x, cal, p, names=names, metadata=m)
    for key, conv in convs.items():
        meta = model_metadata(sp, arch, shape, names=names, dtype="int8" if key.endswith("int8") else "float32")
        path = where / f"{key}.{key.split('-')[0]}"
        t = time.perf_counter()
        conv(path, meta)
        f = {"bytes": path.stat().st_size, "convert_s": round(time.perf_counter() - t, 2)}
        if key.startswith("tflite"):
            f.update(tflite_activation_memory(path))
        rec["files"][key] = f
        path.unlink()
    return rec


def machine() -> dict:
    from nagkit.runtimes.versions import converter_versions, runtime_versions

    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            **converter_versions(), **runtime_versions()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--ofa", type=int, default=4)
    ap.add_argument("--int8", type=int, default=6)
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    partial = OUT / "exports.partial.jsonl"
    done = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            r = json.loads(line)
            done[(r["space"], r["arch"])] = r
    jobs = plan(a.n, a.ofa, a.int8)
    for i, job in enumerate(jobs):
        if (job["space"], job["arch"]) in done:
            continue
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            rec = export_one(job, Path(d))
        done[(job["space"], job["arch"])] = rec
        with open(partial, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"[{i + 1}/{len(jobs)}] {job['space']} {job['arch']} {time.perf_counter() - t:.0f} s", file=sys.stderr)
    recs = [done[(j["space"], j["arch"])] for j in jobs]
    tmp = OUT / "exports.json.tmp"
    tmp.write_text(json.dumps({"machine": machine(), "command": "python benchmarks/constraints/measure_exports.py "
                                                                f"--n {a.n} --ofa {a.ofa} --int8 {a.int8}",
                               "networks": recs}, indent=1))
    os.replace(tmp, OUT / "exports.json")


if __name__ == "__main__":
    main()
