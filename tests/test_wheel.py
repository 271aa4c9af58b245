"""`pip install nagkit` works: the wheel carries the default workspace, the device profiles, the
shipped tables and OFA's accuracy predictor with its licence. Installed into a folder of its own
and run from an empty folder in isolated mode (the checkout is not on sys.path, and nagkit
resolves to the installed copy), it builds a bundle on this CPU and generates on ofa-note10."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site folder, wheel path): the wheel built from this checkout, installed with --target."""
    d = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(d / "dist"), str(ROOT)], check=True, capture_output=True, timeout=600)
    wheel = next((d / "dist").glob("nagkit-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(d / "site"),
                    str(wheel)], check=True, capture_output=True, timeout=600)
    return d / "site", wheel


def _nagkit(site: Path, cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import nagkit; "
            "print('nagkit-from', nagkit.__file__, file=sys.stderr); "
            "from nagkit.cli.main import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-I", "-c", code, str(site), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_the_wheel_carries_the_shipped_data(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("workspaces/fmnist/nagkit.toml", "workspaces/fmnist/supernet/supernet.pt",
              "workspaces/fmnist/generator.pt", "workspaces/ofa-note10/generator.pt", "ofa/acc_predictor.pth",
              "ofa/LICENSE", "device_profiles/android-typical.yaml", "latency_tables/fmnist-cpu-litert.json",
              "latency_tables/note10.json"):
        assert f"nagkit/resources/{f}" in names, f
    assert not any(n.endswith((".pyc", ".lock")) or "dataset.jsonl" in n and "ofa-" in n for n in names)


def test_the_installed_wheel_builds_and_generates_from_an_empty_folder(installed, tmp_path, cli_env):
    site, _ = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in cli_env.items() if k != "PYTHONPATH"}
    r = _nagkit(site, empty, env, "build", "--budget", "1.9", "--export", "tflite", "--device", "cpu", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"nagkit-from {site / 'nagkit' / '__init__.py'}" in r.stderr
    res = json.loads(r.stdout)
    assert res["verified"] and res["measured"]["median_ms"] > 0 and res["device"].startswith("cpu")
    assert (empty / "nagkit-bundle-1.9ms" / "model.tflite").is_file()
    g = _nagkit(site, empty, env, "generate", "--workspace", "ofa-note10", "--budget", "30", "--json")
    assert g.returncode == 0, g.stderr[-3000:]
    best = json.loads(g.stdout)["results"][0]["best"]
    assert best["latency_ms"] <= 30 and best["accuracy"] > 0.7  # OFA's predictor, shipped in the wheel
    assert sorted(p.name for p in empty.iterdir()) == ["nagkit-bundle-1.9ms", "nagkit-bundle-1.9ms.zip"]
