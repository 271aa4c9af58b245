"""A clone with no ../shared folder: nothing nagkit runs reads outside the repository. The tracked
files are copied to a folder whose parent has no `shared`, and from there `make demo`'s command
and `nagkit generate --workspace ofa-note10 --budget 30` run, with nagkit imported from the copy.
The copy's own suite collects with no error, and the tests that need the shared data skip, each
named with the path and the setting that provides it (or fail, under NAGKIT_REQUIRE_SHARED=1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs import readme_demo_transcript

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


def _pytest_in(clone: Path, cli_env: dict, *args: str, **env: str) -> subprocess.CompletedProcess:
    """pytest run in the copy, on its own tests, as a developer without ../shared would run it."""
    e = {k: v for k, v in _env(clone, cli_env).items()
         if k not in ("NAGKIT_SHARED_DIR", "NAGKIT_REQUIRE_SHARED", "PYTEST_ADDOPTS") and not k.startswith("PYTEST_XDIST")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=clone,
                          env=dict(e, **env), capture_output=True, text=True, timeout=600)


def test_suite_of_a_copy_collects_and_skips_the_shared_data_tests_by_name(clone, cli_env):
    """The whole tree is collected (a module that read ../shared at import would be an error), and
    the tests marked shared_data are reported skipped: named, with the path and NAGKIT_SHARED_DIR."""
    p = _pytest_in(clone, cli_env, "-m", "shared_data", "-rs")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    last = p.stdout.strip().splitlines()[-1]
    m = re.match(r"(\d+) skipped, \d+ deselected", last)  # nothing else: no error, nothing run
    assert m and not re.search(r"error|passed|failed", last), p.stdout[-3000:]
    n_skipped = int(m.group(1))
    section = p.stdout.split(f"{n_skipped} tests skipped: shared data missing")[1].split("short test summary")[0]
    named = [ln.strip() for ln in section.splitlines() if ln.startswith("  tests/")]
    assert len(named) == n_skipped
    for f in ("tests/supernet/test_golden.py", "tests/cli/test_export_cli.py", "tests/latency/test_ofa.py",
              "tests/devices/test_benchmark_model.py"):
        assert any(n.startswith(f + "::") for n in named), f
    shared = (clone / ".." / "shared").resolve()
    for why in ("data/ofa-golden", "data/ofa-note10/note10_lut", "data/benchmark_model"):
        assert f"needs shared data: {why} not found in {shared} (../shared beside the repository); " \
               f"set NAGKIT_SHARED_DIR=/path/to/shared" in section, why


def test_require_shared_turns_those_skips_into_failures(clone, cli_env):
    """.ci/run sets NAGKIT_REQUIRE_SHARED=1: a CI run without the data fails instead of skipping."""
    p = _pytest_in(clone, cli_env, "tests/space/test_counts.py", NAGKIT_REQUIRE_SHARED="1")
    assert p.returncode == 1, p.stdout[-3000:]
    assert "ERROR tests/space/test_counts.py::test_params_match_ofa_golden_counts" in p.stdout
    assert "NAGKIT_REQUIRE_SHARED=1 and this test needs shared data: data/ofa-golden not found" in p.stdout
    assert re.search(r"\b\d+ passed, 1 error\b", p.stdout), p.stdout[-2000:]
    ci = (clone / ".ci" / "run").read_text()
    assert re.search(r"^export NAGKIT_REQUIRE_SHARED=1$", ci, re.M), ci


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
    # the README's transcript is this output: the same command and the same lines, label by label
    command, readme_lines = readme_demo_transcript()
    assert err[1].startswith(f"demo: {command} --out out/demo-") and err[1].endswith(" --force"), (err[1], command)

    def labels(lines):
        return [ln.split()[0] for ln in lines if ln.strip() and not ln.startswith(" ")]

    assert labels(p.stdout.splitlines()) == labels(readme_lines), (p.stdout, readme_lines)


def test_generate_on_ofa_note10_without_shared(clone, cli_env):
    p = subprocess.run([sys.executable, "-m", "nagkit", "generate", "--workspace", "ofa-note10", "--budget", "30",
                        "--json"], cwd=clone, env=_env(clone, cli_env), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)["results"][0]
    assert res["best"]["latency_ms"] <= 30 and res["accuracy_source"] == "ofa-predictor"
