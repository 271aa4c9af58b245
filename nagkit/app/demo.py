"""The demo's work on the embedded default workspace (nagkit/resources/workspaces/fmnist).

1. ``nagkit build --budget B --export tflite,onnx --device cpu`` for a mid-range budget B of
   the workspace's generator range;
2. the test accuracy of the exported TFLite model, run with LiteRT on the Fashion-MNIST test
   set (10,000 images, never used for training or search), which the build measures for the
   bundle's manifest.

Without the default workspace's weights, table and generator, the demo falls back to exporting
a subnet of OFA's golden checkpoint (:func:`golden_export_args`). ``make demo`` runs
:mod:`nagkit.cli.demo`, which prints what this returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WORKSPACE = "fmnist"
FORMATS = "tflite,onnx"
DEVICE = "cpu"


def demo_command(budget: float) -> str:
    """The ``nagkit build`` command the demo runs for ``budget`` (without ``--out``/``--force``):
    :func:`run_default` builds with exactly these settings, the demo prints it, and the README's
    ``make demo`` transcript quotes it (``tests/test_docs.py`` holds the two together)."""
    return f"nagkit build --workspace {WORKSPACE} --budget {budget:g} --export {FORMATS} --device {DEVICE}"


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


def default_budget() -> tuple[float, Any]:
    """(mid-range budget of the default workspace's generator, the generator's budget grid)."""
    from nagkit.app.workspace import load_workspace

    grid = load_workspace(WORKSPACE).nag_model(with_source=False).grid
    return round(grid.lo + 0.5 * (grid.hi - grid.lo), 1), grid


def run_default(out: Path, budget: float, say=None) -> dict[str, Any]:
    """Build for ``budget`` on this CPU into ``out``; the result, with the exported TFLite model's
    test accuracy that the build measured for the manifest (also written to
    ``out/../demo-result.json``). ``say`` hears each phase."""
    from nagkit.app.build import BuildOptions, build
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(WORKSPACE)
    res = build(budget, workspace=ws, options=BuildOptions(device_spec=DEVICE, formats=FORMATS, out=out, force=True),
                say=say)
    test = next(a for a in res.accuracies if a["split"].startswith("test"))
    acc, n, secs = test["value"], test["images"], res.timings_s.get("accuracy", 0.0)
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
