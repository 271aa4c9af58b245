"""The main job on the embedded default workspace (examples/workspaces/fmnist).

1. ``nagkit build --budget B --export tflite,onnx --device cpu`` for a mid-range budget B of
   the workspace's generator range;
2. the test accuracy of the exported TFLite model, run with LiteRT on the Fashion-MNIST test
   set (10,000 images, never used for training or search).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

WORKSPACE = "fmnist"


def default_workspace_ready(root: Path) -> bool:
    from nagkit.errors import NagkitError

    try:
        from nagkit.workspace import load_workspace

        ws = load_workspace(WORKSPACE)
        ws.latency_table  # noqa: B018 - loads and verifies the table
        return all(ws.artifact_path(k).is_file() for k in ("evaluator", "generator")) and ws.supernet_path() is not None
    except NagkitError:
        return False


def litert_test_accuracy(model_path: Path, space, r: int, limit: int | None = None) -> tuple[float, int, float]:
    """Top-1 of a batch-1 TFLite model on the Fashion-MNIST test set with LiteRT."""
    import numpy as np

    from nagkit.images.fmnist import load_split, preprocess
    from nagkit.runtimes.models import load_model

    x, y = load_split("test")
    if limit:
        x, y = x[:limit], y[:limit]
    m = load_model(model_path, threads=1)
    t0 = time.perf_counter()
    correct = 0
    for i in range(0, len(x), 500):
        xb = preprocess(x[i:i + 500], r, space.mean, space.std).numpy()
        out = m.run(xb)
        correct += int((np.argmax(out, axis=1) == y[i:i + 500]).sum())
    return correct / len(x), len(x), time.perf_counter() - t0


def run_default_demo(root: Path) -> int:
    if not default_workspace_ready(root):
        from nagkit.demo import golden_export_demo

        print("demo: the default workspace is incomplete; running the golden export instead", file=sys.stderr)
        return golden_export_demo(root / "out" / "demo-golden")
    from nagkit.build import build
    from nagkit.nag.infer import NagModel
    from nagkit.workspace import load_workspace

    ws = load_workspace(WORKSPACE)
    grid = NagModel.from_workspace(ws, with_source=False).grid
    budget = round(grid.lo + 0.5 * (grid.hi - grid.lo), 1)
    out = root / "out" / f"demo-{budget:g}ms"
    print(f"demo: nagkit build --workspace {WORKSPACE} --budget {budget:g} --export tflite,onnx --device cpu "
          f"--out {out} --force", file=sys.stderr)
    res = build(budget, workspace=ws, device_spec="cpu", formats="tflite,onnx", out=out, force=True)
    arch = ws.space.parse_arch(res.arch)
    acc, n, secs = litert_test_accuracy(Path(res.bundle) / "model.tflite", ws.space, arch.r)
    m = res.measured or {}
    print(f"bundle     {res.bundle} (+ {res.zip})")
    print(f"arch       {res.arch}")
    print(f"budget     {budget:g} ms   generator range {grid.lo:.2f}..{grid.hi:.2f} ms")
    print(f"predicted  {res.predicted_ms:.3f} ms (latency table from the reference CPU, LiteRT 1 thread)")
    print(f"measured   {m.get('median_ms', float('nan')):.3f} ms median on this CPU ({res.device}, n={m.get('n')})")
    print(f"accuracy   {100 * acc:.2f}% top-1 on the Fashion-MNIST test set ({n} images, exported TFLite run "
          f"with LiteRT, {secs:.1f} s)")
    if res.accuracy is not None:
        print(f"           {100 * res.accuracy:.2f}% on the validation split ({res.accuracy_source})")
    print("time       " + ", ".join(f"{k} {v:.2f}s" for k, v in res.timings_s.items()))
    (root / "out").mkdir(exist_ok=True)
    (root / "out" / "demo-result.json").write_text(json.dumps(
        dict(res.to_dict(), test_accuracy=acc, test_images=n), indent=1, default=str))
    return 0
