"""The CI example (examples/ci/check-latency.sh) gating a model on the loopback ADB device, run
with Python 3.11: a budget that passes (exit 0) and one that fails (exit 1), nagkit failing to
run the check (exit 3, unreachable device; exit 2, bad input) and a missing setting. Every way
out leaves a valid JSON report that says what happened, and stderr carries nothing but nagkit's
own lines and the gate's summary."""

from __future__ import annotations

import json
import socket
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


def _gate(tmp_path: Path, env: dict, **settings: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / "latency.json"
    env = dict(env, NAGKIT_REPORT=str(report), NAGKIT=f"{sys.executable} -m nagkit", NAGKIT_PYTHON=sys.executable,
               ADB_SERVER_SOCKET="tcp:127.0.0.1:1", **settings)
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    return p, json.loads(report.read_text())


def _phone(tmp_path: Path, port: int) -> Path:
    profile = tmp_path / "phone.yaml"
    profile.write_text(
        f"device: adb:127.0.0.1:{port}\n"
        "threads: 1\ntaskset: f0\nnum_runs: 5\nwarmup_runs: 1\nmin_secs: 0.05\nwarmup_min_secs: 0.01\n"
        f"adb_key: {tmp_path / 'adbkey'}\nconnect_timeout_s: 3.0\nreconnect_retries: 0\n")
    return profile


def test_python_is_3_11():
    assert sys.version_info[:2] == (3, 11), "the CI gate must be checked with Python 3.11"


@pytest.mark.slow
@pytest.mark.adb
@pytest.mark.parametrize("budget, expected", [(5000, 0), (0.0001, 1)])
def test_ci_gate_on_loopback_adb(tmp_path, small_tflite, cli_env, budget, expected):
    from nagkit.devices.loopback import LoopbackAdbd

    with LoopbackAdbd(tmp_path / "sandbox", port=0) as adbd:
        p, report = _gate(tmp_path, cli_env, NAGKIT_MODEL=str(small_tflite),
                          NAGKIT_DEVICE=str(_phone(tmp_path, adbd.port)), NAGKIT_BUDGET_MS=str(budget))
    assert p.returncode == expected, p.stdout + p.stderr
    assert report["passed"] is (expected == 0) and report["exit_code"] == expected
    assert report["budget_ms"] == budget and 0 < report["median_ms"] and report["latency"]["n"] >= 5
    assert report["device"].startswith("adb:127.0.0.1:")
    if expected == 0:
        assert p.stdout.strip() == f"latency gate: PASS ({report['median_ms']:.2f} ms <= 5000 ms on {report['device']})"
        assert all(ln.startswith("warning: noisy measurement") for ln in p.stderr.splitlines()), p.stderr
    else:
        err = [ln for ln in p.stderr.strip().splitlines() if not ln.startswith("warning: noisy measurement")]
        assert err[0].startswith("error: median") and err[1].startswith("  hint: ")
        assert err[-1].startswith("latency gate: FAIL (") and len(err) == 3


def test_ci_gate_reports_an_unreachable_device(tmp_path, small_tflite, cli_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p, report = _gate(tmp_path, cli_env, NAGKIT_MODEL=str(small_tflite), NAGKIT_DEVICE=str(_phone(tmp_path, port)),
                      NAGKIT_BUDGET_MS="10")
    assert p.returncode == 3 and report["exit_code"] == 3 and report["passed"] is False
    assert f"127.0.0.1:{port}" in report["error"] and report["hint"]
    assert p.stdout == "" and p.stderr.splitlines()[-1].startswith("latency gate: ERROR (")
    assert "Traceback" not in p.stderr and "SyntaxError" not in p.stderr


def test_ci_gate_reports_bad_input(tmp_path, cli_env):
    p, report = _gate(tmp_path, cli_env, NAGKIT_MODEL=str(tmp_path / "missing.tflite"), NAGKIT_DEVICE="cpu",
                      NAGKIT_BUDGET_MS="10")
    assert p.returncode == 2 and report == {**report, "passed": False, "exit_code": 2, "nagkit_exit_code": 2}
    assert "missing.tflite" in report["error"]
    assert p.stderr.startswith("error: ") and "Traceback" not in p.stderr


def test_ci_gate_reports_missing_settings(tmp_path, cli_env):
    env = {k: v for k, v in cli_env.items() if not k.startswith("NAGKIT_")}
    p, report = _gate(tmp_path, env)
    assert p.returncode == 2 and report["exit_code"] == 2 and report["passed"] is False
    assert "NAGKIT_MODEL is not set" in report["error"]
    assert p.stderr.strip().splitlines() == [f"latency gate: ERROR ({report['error']})"]
