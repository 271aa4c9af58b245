"""Real files under --max-size-mb (issue 34's "real files" point): `nagkit build` on the default
workspace with a size limit, exported in fp32 (TFLite) and int8 (TFLite), each through the CLI
with --json. Records the limit, the manifest's figures and the bytes of the files on disk.

    .venv/bin/python benchmarks/constraints/real_files.py      # results/real_files.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "nag"))

from bench_nag import machine  # noqa: E402

CASES = [("tflite", 2.8, "3"), ("tflite-int8", 1.1, "3")]


def main() -> int:
    rows = []
    info = machine()
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, mb, budget in CASES:
            out = Path(tmp) / fmt
            cmd = [sys.executable, "-m", "nagkit", "build", "--budget", budget, "--max-size-mb", str(mb),
                   "--export", fmt, "--accuracy", "never", "--out", str(out), "--json"]
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            man = json.loads((out / "manifest.json").read_text())
            c = man["constraints"]
            files = {f.name: f.stat().st_size for f in out.iterdir() if f.suffix in (".tflite", ".onnx")}
            row = {"export": fmt, "precision": "int8" if fmt.endswith("int8") else "fp32", "max_size_mb": mb, "budget_ms": float(budget),
                   "arch": man["arch"]["canonical"],
                   "params": c["reached"]["params"], "manifest_file_bytes": c["reached"]["file_bytes"],
                   "files_on_disk": files, "estimate_mb": c["constraints"]["size_mb"]["estimated_mb"],
                   "binding": c["binding"],
                   "manifest_equals_files": c["reached"]["file_bytes"] == files,
                   "meets_limit": max(files.values()) <= mb * 1e6}
            rows.append(row)
            print(json.dumps(row), flush=True)
    res = {"machine": info, "cases": rows, "all_ok": all(r["manifest_equals_files"] and r["meets_limit"] for r in rows)}
    (ROOT / "benchmarks" / "constraints" / "results" / "real_files.json").write_text(json.dumps(res, indent=1) + "\n")
    print("all ok" if res["all_ok"] else "NOT ok")
    return 0 if res["all_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
