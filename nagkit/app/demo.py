"""The demo's work on the embedded default workspace (nagkit/resources/workspaces/fmnist).

1. ``nagkit build --budget B --export tflite,onnx --device cpu`` for a mid-range budget B of
   the workspace's generator range;
2. the test accuracy of the exported TFLite model, run with LiteRT on the Fashion-MNIST test
   set (10,000 images, never used for training or search).

Without the default workspace's weights, table and generator, the demo falls back to exporting
a subnet of OFA's golden checkpoint (:func:`golden_export_args`). ``make demo`` runs
:mod:`nagkit.cli.demo`, which prints what this returns.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

WORKSPACE = "fmnist"


def default_workspace_ready() -> bool:
    """Whether the default workspace has its table, evaluator, generator and supernet weights."""
    from nagkit.app.workspace import load_workspace
    from nagkit.errors import NagkitError

    try:
        ws = load_workspace(WORKSPACE)
        ws.latency_table  # noqa: B018 - loads and verifies the table
        return all(ws.artifact_path(k).is_file() for k in ("evaluator", "generator")) and ws.supernet_path() is not None
    except NagkitError:
        return False


def litert_test_accuracy(model_path: Path, space, r: int, limit: int | None = None) -> tuple[float, int, float]:
    """Top-1 of a batch-1 TFLite model on the Fashion-MNIST test set with LiteRT:
    (accuracy, images, seconds)."""
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


def default_budget() -> tuple[float, Any]:
    """(mid-range budget of the default workspace's generator, the generator's budget grid)."""
    from nagkit.app.workspace import load_workspace

    grid = load_workspace(WORKSPACE).nag_model(with_source=False).grid
    return round(grid.lo + 0.5 * (grid.hi - grid.lo), 1), grid


def run_default(out: Path, budget: float, say=None) -> dict[str, Any]:
    """Build for ``budget`` on this CPU into ``out``, then the exported TFLite model's test
    accuracy; the result (also written to ``out/../demo-result.json``). ``say`` hears each phase."""
    from nagkit.app.build import BuildOptions, build
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(WORKSPACE)
    res = build(budget, workspace=ws, options=BuildOptions(device_spec="cpu", formats="tflite,onnx", out=out,
                                                           force=True), say=say)
    arch = ws.space.parse_arch(res.arch)
    if say is not None:
        say("demo: test accuracy of the exported TFLite model (10,000 Fashion-MNIST test images, LiteRT)")
    acc, n, secs = litert_test_accuracy(Path(res.bundle) / "model.tflite", ws.space, arch.r)
    result = dict(res.to_dict(), test_accuracy=acc, test_images=n, test_seconds=secs)
    out.parent.mkdir(parents=True, exist_ok=True)
    (out.parent / "demo-result.json").write_text(json.dumps(dict(res.to_dict(), test_accuracy=acc, test_images=n),
                                                            indent=1, default=str))
    return result


def golden_export_args(root: Path, out: Path) -> list[str]:
    """``nagkit export`` arguments for OFA golden case 1 (the fallback demo), from
    ``../shared/data/ofa-golden`` beside the repository."""
    golden = (root / ".." / "shared" / "data" / "ofa-golden").resolve()
    case = json.loads((golden / "golden_cases.json").read_text())[1]
    arch = json.dumps(dict(case["config"], r=case["resolution"]))
    return ["export", "--weights", str(golden / "ofa_mbv3_d234_e346_k357_w1.0.golden.pth"),
            "--space", "ofa-mbv3-w1.0", "--arch", arch, "--format", "both", "--out", str(out), "--force"]
