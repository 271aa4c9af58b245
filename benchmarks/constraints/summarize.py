"""Summarise ``results/exports.json`` (measure_exports.py): how close nagkit's estimates come.

    python benchmarks/constraints/summarize.py [results/exports.json]

Per space and file kind: the file's bytes beyond ``bytes_per_weight x params`` (the overhead the
size model must cover) and the size estimate's margin over the real file; per .tflite the
measured activation memory (live-tensor peak, LiteRT's arena) against ``peak_activation x bytes
per element``. Writes ``results/summary.json`` and prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results"


def stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "min": xs[0], "median": xs[len(xs) // 2], "max": xs[-1]} if xs else {"n": 0}


def main() -> None:
    from nagkit.nag.constraints import BYTES_PER_WEIGHT, SIZE_OVERHEAD
    from nagkit.space.resources import ACTIVATION_BYTES

    path = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "exports.json"
    data = json.loads(path.read_text())
    out: dict = {"source": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
                 "machine": data["machine"], "by_space": {}}
    for space in sorted({n["space"] for n in data["networks"]}):
        nets = [n for n in data["networks"] if n["space"] == space]
        rows: dict = {"networks": len(nets), "resolutions": sorted({n["r"] for n in nets}), "files": {}}
        for kind in sorted({k for n in nets for k in n["files"]}):
            fmt, prec = kind.split("-")
            have = [n for n in nets if kind in n["files"]]
            bpw = BYTES_PER_WEIGHT[prec]
            over = [n["files"][kind]["bytes"] - bpw * n["params"] for n in have]
            row = {"networks": len(have), "overhead_bytes": stats(over),
                   "bytes_over_params": stats([n["files"][kind]["bytes"] / n["params"] for n in have])}
            if (fmt, prec) in SIZE_OVERHEAD:
                est = [bpw * n["params"] + SIZE_OVERHEAD[(fmt, prec)] for n in have]
                row["estimate_minus_file_bytes"] = stats([e - n["files"][kind]["bytes"] for e, n in zip(est, have)])
            if fmt == "tflite":
                b = ACTIVATION_BYTES[prec]
                est = [n["peak_elements"] * b for n in have]
                row["peak"] = {
                    "bytes_per_element": b,
                    "liveness_equals_estimate": sum(n["files"][kind]["liveness_bytes"] == e for n, e in zip(have, est)),
                    "liveness_over_estimate": stats([n["files"][kind]["liveness_bytes"] / e for n, e in zip(have, est)]),
                    "arena_over_estimate": stats([n["files"][kind]["arena_bytes"] / e for n, e in zip(have, est)]),
                }
            rows["files"][kind] = row
        out["by_space"][space] = rows
    tmp = RESULTS / "summary.json.tmp"
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    tmp.replace(RESULTS / "summary.json")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
