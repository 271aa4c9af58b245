"""`make demo` (``python -m nagkit.cli.demo``): the main job on the embedded default workspace.

If the embedded default workspace (nagkit/resources/workspaces/fmnist) is present with its weights,
table and generator, this runs ``nagkit build`` on it for a mid-range budget on this CPU and
reports the test accuracy of the exported TFLite model (:mod:`nagkit.app.demo`). Otherwise it
falls back to the strongest end-to-end path without a trained default: export a subnet of OFA's
golden checkpoint (../shared/data/ofa-golden) to TFLite and ONNX, verify both against PyTorch,
and print what it made.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def golden_export_demo(out: Path) -> int:
    from nagkit.app.demo import golden_export_args
    from nagkit.cli.main import main

    print(f"demo: exporting OFA golden case 1 to TFLite and ONNX in {out}", file=sys.stderr)
    return main(golden_export_args(ROOT, out))


def _shown(path: Path | str) -> str:
    """``path`` relative to the current folder when it lies below it (``make demo`` runs in the
    repository root, so the README's transcript reads ``out/...``), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def default_demo() -> int:
    from nagkit.app.demo import default_budget, demo_command, run_default

    budget, grid = default_budget()
    out = ROOT / "out" / f"demo-{budget:g}ms"
    print(f"demo: {demo_command(budget)} --out {_shown(out)} --force", file=sys.stderr)
    r = run_default(out, budget, say=lambda line: print(line, file=sys.stderr, flush=True))
    m = r["measured"] or {}
    print(f"bundle     {_shown(r['bundle'])} (+ {_shown(r['zip'])})")
    print(f"arch       {r['arch']}")
    print(f"budget     {budget:g} ms   generator range {grid.lo:.2f}..{grid.hi:.2f} ms")
    print(f"predicted  {r['predicted_ms']:.3f} ms (latency table from the reference CPU, LiteRT 1 thread)")
    print(f"measured   {m.get('median_ms', float('nan')):.3f} ms median on this CPU ({r['device']}, n={m.get('n')})")
    print(f"accuracy   {100 * r['test_accuracy']:.2f}% top-1 on the Fashion-MNIST test set ({r['test_images']} images, "
          f"exported TFLite run with LiteRT, {r['test_seconds']:.1f} s)")
    for a in r["accuracies"][1:]:
        print(f"           {100 * a['value']:.2f}% on {a['dataset']} {a['split']} ({a['images']} images, {a['evaluated']})")
    print("time       " + ", ".join(f"{k} {v:.2f}s" for k, v in r["timings_s"].items()))
    return 0


def main() -> int:
    from nagkit.app.demo import default_workspace_ready

    t0 = time.perf_counter()
    if default_workspace_ready():
        rc = default_demo()
    else:
        print("demo: the default workspace is incomplete; running the golden export instead", file=sys.stderr)
        rc = golden_export_demo(ROOT / "out" / "demo-golden")
    print(f"demo: finished in {time.perf_counter() - t0:.1f} s (exit {rc})", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
