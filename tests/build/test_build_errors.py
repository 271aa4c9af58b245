"""`nagkit build` bad inputs: infeasible budget, unknown device, missing workspace, existing
output folder. Each is one line on stderr, the right exit code, and nothing left behind."""

from __future__ import annotations

import pytest

from ..cli.helpers import run_cli


def test_infeasible_budget_exits_1_naming_the_fastest_latency(cli_env, tmp_path):
    out = tmp_path / "b"
    r = run_cli(["build", "--budget", "5", "--workspace", "ofa-note10", "--random-init", "--out", str(out)],
                env=cli_env)
    assert r.code == 1, r.err
    assert "below the fastest network of this space on this table (9.89 ms)" in r.err and "Traceback" not in r.err
    assert "pass a budget >= 9.89 ms" in r.err
    assert not out.exists() and not (tmp_path / "b.zip").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


def test_unknown_device(cli_env, tmp_path):
    r = run_cli(["build", "--budget", "30", "--workspace", "ofa-note10", "--random-init", "--device", "toaster",
                 "--out", str(tmp_path / "b")], env=cli_env)
    assert r.code == 2 and "toaster" in r.err and "nagkit devices" in r.err and "Traceback" not in r.err
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


def test_missing_workspace(cli_env, tmp_path):
    r = run_cli(["build", "--budget", "30", "--workspace", "ofa-note11", "--out", str(tmp_path / "b")], env=cli_env)
    assert r.code == 2 and "ofa-note11" in r.err and "ofa-note10" in r.err and "Traceback" not in r.err


def test_existing_output_folder_not_overwritten(cli_env, tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = run_cli(["build", "--budget", "30", "--workspace", "ofa-note10", "--random-init", "--out", str(out)],
                env=cli_env)
    assert r.code == 2 and "--force" in r.err
    assert (out / "keep.txt").read_text() == "mine"


def test_no_weights_needs_random_init(cli_env, tmp_path):
    r = run_cli(["build", "--budget", "30", "--workspace", "ofa-note10", "--out", str(tmp_path / "b")], env=cli_env)
    assert r.code == 2 and "--random-init" in r.err and "--weights" in r.err


@pytest.mark.parametrize("bad", ["0", "-3", "nan"])
def test_bad_budget_values(cli_env, tmp_path, bad):
    r = run_cli(["build", "--budget", bad, "--workspace", "ofa-note10", "--random-init", "--out", str(tmp_path / "b")],
                env=cli_env)
    assert r.code == 2 and "budget" in r.err.lower()


def test_issue35_data_without_finetune_message_and_help_agree(tmp_path, capsys):
    """`build --export tflite-int8 --data DIR` said "--data is only read when fine-tuning", while
    --help said int8 calibrates on "the workspace's images (or --data)". Both now say: --data
    goes with --finetune, and an int8 export then calibrates on it too."""
    import re

    from ..cli.helpers import run_cli_inproc

    (tmp_path / "photos").mkdir()
    r = run_cli_inproc(["build", "--budget", "3", "-w", "fmnist", "--export", "tflite-int8", "--data",
                        str(tmp_path / "photos"), "--out", str(tmp_path / "b")], capsys)
    assert r.code == 2 and "--data is only read with --finetune" in r.err and "calibrates on them" in r.err, r.err
    assert not (tmp_path / "b").exists()
    helptext = " ".join(run_cli_inproc(["build", "--help"], capsys).out.split())
    data_help = re.search(r"--data DIR (.*?) --mixed-sizes", helptext).group(1)
    export_help = re.search(r"--export TEXT (.*?) --max-int8-drop", helptext).group(1)
    assert data_help.startswith("Only with --finetune") and "int8 export calibrates on them" in data_help
    assert "with --finetune N --data DIR" in export_help and "(or --data)" not in export_help
