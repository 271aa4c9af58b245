"""A clone with no ../shared folder: nothing nagkit runs reads outside the repository. The tracked
files are copied to a folder whose parent has no `shared`, and from there `make demo`'s command
and `nagkit generate --workspace ofa-note10 --budget 30` run, with nagkit imported from the copy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    dest = tmp_path_factory.mktemp("lonely") / "nagkit"
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    assert not (dest.parent / "shared").exists() and (dest / "Makefile").is_file()
    return dest


def _env(clone: Path, cli_env: dict) -> dict:
    return dict(cli_env, PYTHONPATH=str(clone))


def test_make_demo_runs_without_shared(clone, cli_env):
    cmd = subprocess.run(["make", "-n", "demo"], cwd=clone, capture_output=True, text=True).stdout
    assert "-m nagkit.cli.demo" in cmd  # what make demo runs once the venv is set up
    p = subprocess.run([sys.executable, "-c", "import nagkit, sys; print(nagkit.__file__, file=sys.stderr); "
                        "from nagkit.cli.demo import main; sys.exit(main())"], cwd=clone, env=_env(clone, cli_env),
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    err = p.stderr.splitlines()
    assert err[0] == str(clone / "nagkit" / "__init__.py")
    assert "golden" not in p.stderr and "accuracy" in p.stdout and "measured" in p.stdout
    # a clean console: only nagkit's own lines (no absl, oneDNN, pytree or XNNPACK notices)
    assert all(ln.startswith(("demo: ", "build: ", "warning: ")) for ln in err[1:]), p.stderr


def test_generate_on_ofa_note10_without_shared(clone, cli_env):
    p = subprocess.run([sys.executable, "-m", "nagkit", "generate", "--workspace", "ofa-note10", "--budget", "30",
                        "--json"], cwd=clone, env=_env(clone, cli_env), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)["results"][0]
    assert res["best"]["latency_ms"] <= 30 and res["accuracy_source"] == "ofa-predictor"
