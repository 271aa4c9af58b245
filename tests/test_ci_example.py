"""The CI example (examples/ci/check-latency.sh) gating a model on the loopback ADB device,
both ways: a budget that passes (exit 0) and one that fails (exit 1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "ci" / "check-latency.sh"


@pytest.fixture(scope="module")
def small_tflite(tmp_path_factory):
    import torch

    from nagkit.runtimes.convert import to_tflite

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(16, 10)).eval()
    return to_tflite(net, torch.randn(1, 3, 32, 32), tmp_path_factory.mktemp("m") / "model.tflite")


@pytest.mark.slow
@pytest.mark.adb
@pytest.mark.parametrize("budget, expected", [(5000, 0), (0.0001, 1)])
def test_ci_gate_on_loopback_adb(tmp_path, small_tflite, cli_env, budget, expected):
    from nagkit.devices.loopback import LoopbackAdbd

    with LoopbackAdbd(tmp_path / "sandbox", port=0) as adbd:
        profile = tmp_path / "phone.yaml"
        profile.write_text(
            f"device: adb:127.0.0.1:{adbd.port}\n"
            "threads: 1\ntaskset: f0\nnum_runs: 5\nwarmup_runs: 1\nmin_secs: 0.05\nwarmup_min_secs: 0.01\n"
            f"adb_key: {tmp_path / 'adbkey'}\n"
        )
        env = dict(cli_env, NAGKIT_MODEL=str(small_tflite), NAGKIT_DEVICE=str(profile),
                   NAGKIT_BUDGET_MS=str(budget), NAGKIT_REPORT=str(tmp_path / "latency.json"),
                   NAGKIT=f"{sys.executable} -m nagkit")
        p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == expected, p.stdout + p.stderr
    report = json.loads((tmp_path / "latency.json").read_text())
    assert report["passed"] is (expected == 0)
    assert report["median_ms"] > 0 and report["latency"]["n"] >= 5
    assert report["device"].startswith("adb:127.0.0.1:")
    assert ("PASS" in p.stdout) if expected == 0 else ("FAIL" in p.stderr)


def test_ci_gate_reports_missing_settings(cli_env):
    env = {k: v for k, v in cli_env.items() if not k.startswith("NAGKIT_")}
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "NAGKIT_MODEL" in p.stderr
