"""`nagkit build` and `nagkit generate` read the table's `time_budget` record (issue 36): they say
what fidelity the table's profile reached and warn when it was cut short or is below a usable
level, on the screen, in --json (`table_fidelity`) and, for a build, in the manifest.

The workspace is a copy of the default one whose table carries a synthetic record (no profiling);
the build is ONNX with the workspace's own weights passed as --weights and --accuracy never, as in
test_build_fallback.py: a real export of a small network, a few seconds."""

from __future__ import annotations

import json
import shutil

import pytest

from nagkit.resources import ROOT, WORKSPACES
from tests.cli.helpers import run_cli_inproc
from tests.latency.test_table_fidelity import provenance

WEIGHTS = WORKSPACES / "fmnist" / "supernet" / "supernet.pt"
TABLE = "latency_tables/fmnist-cpu-litert.json"

pytestmark = [pytest.mark.usefixtures("one_thread", "fresh_log")]


@pytest.fixture
def fresh_log():
    """nagkit's `warning: ...` lines on this test's stderr: the CLI adds its handler once per process,
    bound to the stderr of the test that ran it first."""
    import logging

    lg = logging.getLogger("nagkit")
    saved = lg.handlers[:]
    lg.handlers.clear()
    yield
    lg.handlers[:] = saved


@pytest.fixture
def cut_short_ws(tmp_path):
    """The default workspace, its table's provenance with a record of a profile cut short for time."""
    root = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "fmnist", root)
    obj = json.loads((ROOT / TABLE).read_text())
    obj["provenance"].update(provenance())  # resolved before the shipped table: the workspace's own folder
    (root / TABLE).parent.mkdir(parents=True, exist_ok=True)
    (root / TABLE).write_text(json.dumps(obj))
    return root


def test_build_says_what_the_table_reached_and_warns_that_it_was_cut_short(cut_short_ws, tmp_path, capsys):
    out = tmp_path / "b"
    r = run_cli_inproc(["build", "--budget", "0.8", "--workspace", str(cut_short_ws), "--export", "onnx", "--weights",
                        str(WEIGHTS), "--accuracy", "never", "--out", str(out), "--json"], capsys)
    assert r.code == 0, r.err
    tf = json.loads(r.out)["table_fidelity"]
    assert tf["cut_short"] and tf["level"] == "below usable"
    assert tf["within_5pct"] == 0.29 and tf["within_10pct"] == 0.79
    assert len(tf["warnings"]) == 3
    assert "build: latency table: held out 29% within ±5%, 79% within ±10% (below usable)" in r.err
    assert "warning: the latency table was cut short by its profile's time budget of 10m00s" in r.err
    assert "--resume --time-budget 18m" in r.err and "below a usable level" in r.err
    m = json.loads((out / "manifest.json").read_text())
    assert m["build"]["table_fidelity"] == tf
    assert [n for n in m["notes"] if n.startswith("latency table: ")] == [f"latency table: {w}" for w in tf["warnings"]]
    from nagkit.cli.build import _fidelity_lines

    lines = _fidelity_lines(tf)  # the human form, under `table`
    assert lines[0].startswith("fidelity  held out 29% within ±5%") and lines[1].startswith("WARNING   the latency")


def test_generate_says_it_too_and_a_table_without_the_record_says_nothing(cut_short_ws, capsys):
    r = run_cli_inproc(["generate", "--workspace", str(cut_short_ws), "--budget", "0.8", "--no-accuracy"], capsys)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].startswith(f"table      {TABLE}: held out 29% within ±5%")
    assert "warning: the latency table was cut short" in r.err
    j = run_cli_inproc(["generate", "--workspace", str(cut_short_ws), "--budget", "0.8", "--no-accuracy", "--json"],
                       capsys)
    assert json.loads(j.out)["table_fidelity"]["cut_short"] is True
    plain = run_cli_inproc(["generate", "--budget", "0.8", "--no-accuracy", "--json"], capsys)  # the shipped table
    assert plain.code == 0 and json.loads(plain.out)["table_fidelity"] is None and "cut short" not in plain.err
