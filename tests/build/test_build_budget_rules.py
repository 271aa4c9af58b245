"""`nagkit build --budget 80 --export tflite` on the default workspace, as the design card
writes it: 80 ms is above the slowest network of the space on its table, so the build is for the
most accurate network the generator finds, and the output and the manifest say so; nothing is
measured without --device, and the output and the manifest say that too. A budget below the
fastest network fails (exit 1) naming the range."""

from __future__ import annotations

import json

import pytest

from nagkit.app.build import UNVERIFIED_NOTE
from tests.cli.helpers import run_cli


@pytest.mark.slow
def test_budget_above_the_slowest_network_builds_under_the_stated_rule(tmp_path, cli_env):
    out = tmp_path / "bundle"
    # --accuracy never: the budget rule is under test, not the 10,000-image evaluation (test_build_manifest has it);
    # ONNX: the rule is the same for every format, and the slowest network converts to TFLite in 25 s
    r = run_cli(["build", "--budget", "80", "--export", "onnx", "--accuracy", "never", "--out", str(out)],
                env=cli_env, cwd=tmp_path)
    assert r.code == 0, r.err[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    b = m["build"]
    assert m["budget_ms"] == 80 and b["workspace"] == "fmnist" and "above the slowest network" in b["budget_note"]
    assert b["budget_note"] in m["notes"] and b["generated_for_ms"] < 80
    assert m["latency"]["predicted"]["ms"] <= b["generated_for_ms"] + 1e-9
    assert m["latency"]["measured"] is None and b["verified_on_device"] is False and UNVERIFIED_NOTE in m["notes"]
    assert f"note      {b['budget_note']}" in r.out
    assert "measured  not measured (no --device): the bundle is unverified" in r.out
    assert "build: convert to onnx" in r.err and "Traceback" not in r.err
    assert m["accuracy"] is None and "accuracy  (not measured" in r.out  # never: the exported file was not run


def test_budget_below_the_fastest_network_fails_naming_the_range(tmp_path, cli_env):
    r = run_cli(["build", "--budget", "0.01", "--export", "tflite", "--out", str(tmp_path / "b")], env=cli_env,
                cwd=tmp_path)
    assert r.code == 1 and not (tmp_path / "b").exists()
    err = [ln for ln in r.err.splitlines() if not ln.startswith("build: ")]
    assert err[0].startswith("error: budget 0.01 ms is below the fastest network") and "hint: pass a budget >=" in err[1]
    assert len(err) == 2
