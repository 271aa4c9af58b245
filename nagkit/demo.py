"""`make demo`: the main job on the embedded default workspace.

If the embedded default workspace (examples/workspaces/fmnist) is present with its weights,
table and generator, this runs ``nagkit build`` on it for a mid-range budget on this CPU and
reports the test accuracy of the exported TFLite model. Otherwise it falls back to the
strongest end-to-end path without a trained default: export a subnet of OFA's golden
checkpoint (../shared/data/ofa-golden) to TFLite and ONNX, verify both against PyTorch, and
print what it made.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = (ROOT / ".." / "shared" / "data" / "ofa-golden").resolve()


def golden_export_demo(out: Path) -> int:
    from nagkit.cli.main import main

    case = json.loads((GOLDEN / "golden_cases.json").read_text())[1]
    arch = json.dumps(dict(case["config"], r=case["resolution"]))
    print(f"demo: exporting OFA golden case 1 (r={case['resolution']}) to TFLite and ONNX in {out}", file=sys.stderr)
    return main(["export", "--weights", str(GOLDEN / "ofa_mbv3_d234_e346_k357_w1.0.golden.pth"),
                 "--space", "ofa-mbv3-w1.0", "--arch", arch, "--format", "both", "--out", str(out), "--force"])


def main() -> int:
    t0 = time.perf_counter()
    try:
        from nagkit.demo_default import run_default_demo  # the embedded default workspace, when shipped
    except ImportError:
        run_default_demo = None
    if run_default_demo is not None:
        rc = run_default_demo(ROOT)
    else:
        rc = golden_export_demo(ROOT / "out" / "demo-golden")
    print(f"demo: finished in {time.perf_counter() - t0:.1f} s (exit {rc})", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
