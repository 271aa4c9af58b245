"""`pip install nagkit` works: the wheel carries the default workspace, the device profiles, the
shipped tables and OFA's accuracy predictor with its licence. The wheel built from this checkout
is installed by pip into a fresh venv (no index: nothing is downloaded; the pinned dependencies
are this environment's, seen through a path file, so nagkit itself comes from the wheel alone),
and the venv's `nagkit` script, run from an empty folder, builds a bundle on this CPU and
generates on ofa-note10."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(*cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 600)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(venv folder, wheel path): a fresh venv with the wheel built from this checkout pip-installed."""
    d = tmp_path_factory.mktemp("wheel")
    # built from a copy of the checkout's files, so that no stale build/ folder adds to the wheel
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    src = d / "src"
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    built = _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                 d / "dist", src)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((d / "dist").glob("nagkit-*.whl"))
    fresh = d / "venv"
    made = _run(sys.executable, "-m", "venv", fresh)
    assert made.returncode == 0, made.stderr[-3000:]
    py, env = fresh / "bin" / "python", _env(dict(os.environ))
    purelib = _run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", env=env).stdout.strip()
    inst = _run(py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel, env=env)
    assert inst.returncode == 0, inst.stderr[-3000:]
    # The dependencies: this environment's site-packages as plain path lines, added after the
    # install (so pip could not take this environment's nagkit for the wheel's) and searched after
    # the venv's own site-packages; .pth files there, such as an editable nagkit's, are not run.
    (Path(purelib) / "nagkit_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return fresh, wheel


def _env(cli_env: dict) -> dict:
    """The environment without this checkout on PYTHONPATH (and no outer venv)."""
    return {k: v for k, v in cli_env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def test_the_wheel_carries_the_shipped_data(venv):
    _, wheel = venv
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("workspaces/fmnist/nagkit.toml", "workspaces/fmnist/supernet/supernet.pt",
              "workspaces/fmnist/generator.pt", "workspaces/ofa-note10/generator.pt", "ofa/acc_predictor.pth",
              "ofa/LICENSE", "device_profiles/android-typical.yaml", "latency_tables/fmnist-cpu-litert.json",
              "latency_tables/note10.json", "workspaces/ofa-note10/queries.jsonl", "workspaces/ofa-note10/dataset.jsonl",
              "workspaces/ofa-cpu-w1.0/generator.pt", "workspaces/ofa-cpu-w1.0/queries.jsonl"):
        assert f"nagkit/resources/{f}" in names, f
    assert not any(n.endswith((".pyc", ".lock")) for n in names)


def test_the_venv_has_nagkit_from_the_wheel_and_its_declared_dependencies(venv, tmp_path, cli_env):
    fresh, _ = venv
    py = fresh / "bin" / "python"
    code = ("import importlib.metadata as m, nagkit, adb_shell.transport.usb_transport as u; "
            "print(nagkit.__file__); print(m.version('nagkit')); print(u.UsbTransport.__name__)")
    r = _run(py, "-c", code, cwd=tmp_path, env=_env(cli_env))
    assert r.returncode == 0, r.stderr[-3000:]
    where, version, usb = r.stdout.split()
    assert Path(where).is_relative_to(fresh) and usb == "UsbTransport"  # adb-shell[usb]: libusb1 installed
    from nagkit.version import __version__

    assert version == __version__
    check = _run(py, "-m", "pip", "check", cwd=tmp_path, env=_env(cli_env))
    assert not [ln for ln in check.stdout.splitlines() if ln.lower().startswith("nagkit ")], check.stdout


def test_the_installed_nagkit_runs_the_readme_example_under_spawn_and_generates_from_an_empty_folder(venv, tmp_path,
                                                                                                   cli_env):
    """The README's API example (generate, build on this CPU, check), run by the venv's Python as
    a user's script would be: at its top level, under the spawn start method, without a
    ``__main__`` guard; then the venv's ``nagkit`` script generates on ofa-note10. One build
    serves both the wheel's check and the README's (issue 35: fewer, larger end-to-end cases)."""
    from tests.test_api import readme_example

    fresh, _ = venv
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _env(cli_env)
    script = empty / "user_script.py"
    script.write_text("import multiprocessing\nmultiprocessing.set_start_method('spawn', force=True)\n"
                      + readme_example())
    r = _run(fresh / "bin" / "python", script, cwd=empty, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("1.5 ms: r") and lines[1].startswith("3.0 ms: r")
    assert re.fullmatch(r"out/api-3ms (PASS|FAIL) \d+\.\d{3} ms", lines[2]), lines[2]
    manifest = json.loads((empty / "out" / "api-3ms" / "manifest.json").read_text())
    assert manifest["build"]["verified_on_device"] is True and (empty / "out" / "api-3ms" / "model.tflite").is_file()
    assert manifest["accuracy"]["images"] == 10_000  # the bundled file, on the whole test set
    g = _run(fresh / "bin" / "nagkit", "generate", "--workspace", "ofa-note10", "--budget", "30", "--json", cwd=empty,
             env=env)
    assert g.returncode == 0, g.stderr[-3000:]
    best = json.loads(g.stdout)["results"][0]["best"]
    assert best["latency_ms"] <= 30 and best["accuracy"] > 0.7  # OFA's predictor, shipped in the wheel
    assert sorted(p.name for p in empty.iterdir()) == ["out", "user_script.py"]
    assert not any(Path(env["HOME"]).rglob("nagkit.toml"))  # presets read in place, nothing copied
