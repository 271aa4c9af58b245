"""Issue 35, items 3-5 and 8 (second adversarial pass): every count and seed has one range,
stated in --help and in the error, the same on the CLI, in nagkit.toml and in the Python API;
over-long names are refused in one shortened line. Exit 2, nothing written."""

from __future__ import annotations

import pytest

import nagkit
from nagkit.errors import SEED_MAX, BadInputError
from nagkit.nag.config import DATASET_N_MAX, MAX_EPOCHS, MAX_SAMPLES

from .helpers import image_folder, run_cli_inproc, tree_state

ARCH = "r28-" + "-".join(["k3e3.k3e3"] * 5)
HUGE = str(10**20)


def _refused(r, *says):
    """Exit 2, nothing on stdout, no traceback, a short error naming each of ``says``."""
    assert r.code == 2, (r.code, r.err)
    assert r.out == "" and "Traceback" not in r.err and len(r.err) < 1500, r.err
    for s in says:
        assert s in r.err, (s, r.err)


def _no_user_workspaces(tmp_path_factory=None):
    import os
    from pathlib import Path

    d = Path(os.environ["NAGKIT_HOME"]) / "workspaces"
    assert not d.exists() or list(d.iterdir()) == []


# ---- item 3: generate --samples -------------------------------------------------------------

@pytest.mark.parametrize("value", ["10000000", HUGE, "0"])
def test_generate_samples_is_bounded_and_the_bound_is_stated(value, capsys):
    r = run_cli_inproc(["generate", "-w", "fmnist", "-b", "3", "--samples", value], capsys)
    _refused(r, value, f"1..{MAX_SAMPLES}")
    helptext = run_cli_inproc(["generate", "--help"], capsys).out
    assert f"1..{MAX_SAMPLES:,}" in helptext


def test_samples_bound_is_the_same_in_toml_build_and_the_api(tmp_path, capsys):
    r = run_cli_inproc(["build", "--budget", "3", "-w", "fmnist", "--samples", HUGE, "--out", str(tmp_path / "b")],
                       capsys)
    _refused(r, f"1..{MAX_SAMPLES}")
    assert not (tmp_path / "b").exists()
    with pytest.raises(BadInputError, match=f"1..{MAX_SAMPLES}"):
        nagkit.generate(3.0, workspace="fmnist", samples=MAX_SAMPLES + 1, accuracy=False)
    with pytest.raises(BadInputError, match="samples"):
        nagkit.generate(3.0, workspace="fmnist", samples=0, accuracy=False)  # was: silently the default
    from nagkit.app.workspace import load_workspace

    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", "fmnist"], capsys).code == 0
    text = (ws / "nagkit.toml").read_text()
    (ws / "nagkit.toml").write_text(text + f"\n[inference]\nsamples = {MAX_SAMPLES + 1}\n")
    with pytest.raises(BadInputError, match="samples"):
        load_workspace(ws)


# ---- item 4: one seed range ----------------------------------------------------------------

SEED_CMDS = {
    "finetune": ["finetune", "-w", "fmnist", "--arch", ARCH, "--epochs", "1", "--data", "nowhere", "--out", "OUT"],
    "build": ["build", "--budget", "3", "-w", "fmnist", "--out", "OUT"],
    "export": ["export", "--space", "fmnist-mbv3-w0.5", "--arch", ARCH, "--random-init", "--out", "OUT"],
    "dataset": ["dataset", "-w", "fmnist", "--n", "5"],
    "generate": ["generate", "-w", "fmnist", "-b", "3"],
}


@pytest.mark.parametrize("seed", [str(2**70), "-1", str(SEED_MAX + 1)])
@pytest.mark.parametrize("cmd", list(SEED_CMDS))
def test_seeds_out_of_range_are_refused_everywhere_before_any_work(cmd, seed, tmp_path, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in SEED_CMDS[cmd]]
    r = run_cli_inproc([*argv, "--seed", seed], capsys)
    _refused(r, f"0..{SEED_MAX}")
    assert not (tmp_path / "out").exists()
    _no_user_workspaces()  # `dataset` used to copy the preset before failing
    assert f"0..{SEED_MAX}" in run_cli_inproc([cmd, "--help"], capsys).out


@pytest.mark.parametrize("toml_line", ["seed = -1", f"seed = {2**63}", "seed = 1.5"])
def test_workspace_toml_seed_range(toml_line, tmp_path, capsys):
    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", "fmnist"], capsys).code == 0
    cfg = ws / "nagkit.toml"
    lines = [toml_line if ln.startswith("seed =") else ln for ln in cfg.read_text().splitlines()]
    cfg.write_text("\n".join(lines) + "\n")
    r = run_cli_inproc(["generate", "-w", str(ws), "-b", "3"], capsys)
    _refused(r, "'seed'", f"0..{SEED_MAX}")
    base = "\n".join("seed = 0" if ln.startswith("seed =") else ln for ln in lines) + "\n"
    for section in ("dataset", "evaluator", "generator"):
        head = f"[{section}]\n"
        cfg.write_text(base.replace(head, f"{head}seed = {2**40}\n", 1) if head in base
                       else base + f"{head}seed = {2**40}\n")
        r = run_cli_inproc(["generate", "-w", str(ws), "-b", "3"], capsys)
        assert r.code == 2 and "seed" in r.err and str(SEED_MAX) in r.err, (section, r.err)


def test_api_seed_keywords_share_the_range(tmp_path):
    with pytest.raises(BadInputError, match=f"0..{SEED_MAX}"):
        nagkit.build(3.0, workspace="fmnist", seed=2**70, out=tmp_path / "b")
    with pytest.raises(BadInputError, match=f"0..{SEED_MAX}"):
        nagkit.generate(3.0, workspace="fmnist", seed=-1, accuracy=False)
    assert not (tmp_path / "b").exists()
    r = nagkit.generate(3.0, workspace="fmnist", seed=SEED_MAX, accuracy=False)  # the top of the range works
    assert r[0].best.latency_ms <= 3.0


def _fresh_user_workspace(tmp_path, capsys):
    """A workspace of the user's own: ``nagkit init`` into tmp_path from a tiny synthetic one
    (its latency table and accuracy source are synthetic, so collecting 5 rows takes
    milliseconds, on the old code too), with no dataset rows yet, so that ``nagkit dataset``
    starts a new file instead of resuming one."""
    from nagkit.data.synthetic import tiny_workspace_toml

    src = tmp_path / "src"
    src.mkdir()
    (src / "nagkit.toml").write_text(tiny_workspace_toml())
    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", str(src)], capsys).code == 0
    assert sorted(p.name for p in ws.iterdir()) == ["nagkit.toml"]
    return ws


def _one_error_line(r, value, bound):
    """One error line, naming the value given and the range it must be in."""
    errs = [ln for ln in r.err.splitlines() if "rror:" in ln]
    assert len(errs) == 1 and value in errs[0] and bound in errs[0], r.err


@pytest.mark.parametrize("seed", [str(2**70), "-1", str(SEED_MAX + 1)])
def test_finetune_seed_out_of_range_is_refused_with_every_other_input_valid(seed, tmp_path, capsys):
    """As test_seeds_out_of_range_are_refused_everywhere_before_any_work[finetune-*], but with a
    real ImageFolder for --data, so the old code reaches the seed (2**70: a raw overflow, exit 3;
    -1 and 2**32: trained and bundled, exit 0)."""
    data = image_folder(tmp_path / "data")
    r = run_cli_inproc(["finetune", "-w", "fmnist", "--arch", ARCH, "--epochs", "1", "--data", str(data),
                        "--export", "onnx", "--out", str(tmp_path / "out"), "--seed", seed], capsys)
    _refused(r, f"0..{SEED_MAX}")
    _one_error_line(r, seed, f"0..{SEED_MAX}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no bundle, no zip, no work folder
    _no_user_workspaces()


@pytest.mark.parametrize("seed", [str(2**70), "-1", str(SEED_MAX + 1)])
def test_dataset_seed_out_of_range_is_refused_on_a_users_own_workspace(seed, tmp_path, capsys):
    """As test_seeds_out_of_range_are_refused_everywhere_before_any_work[dataset-*], but on a
    workspace of the user's own with no rows yet, so the old code reaches the seed (-1: a raw
    ValueError, exit 3, after writing the dataset's header; 2**70 and 2**32: 5 rows collected,
    exit 0)."""
    ws = _fresh_user_workspace(tmp_path, capsys)
    before = tree_state(ws)
    r = run_cli_inproc(["dataset", "-w", str(ws), "--n", "5", "--seed", seed], capsys)
    _refused(r, f"0..{SEED_MAX}")
    _one_error_line(r, seed, f"0..{SEED_MAX}")
    assert tree_state(ws) == before  # no dataset.jsonl, nothing else changed
    _no_user_workspaces()
    # the same command with the top of the range collects: only the seed was wrong
    assert run_cli_inproc(["dataset", "-w", str(ws), "--n", "5", "--seed", str(SEED_MAX)], capsys).code == 0


# ---- item 8: epochs and dataset size as capped as in TOML ----------------------------------

def test_finetune_epochs_and_dataset_n_have_the_toml_caps(tmp_path, capsys):
    r = run_cli_inproc(["finetune", "-w", "fmnist", "--arch", ARCH, "--epochs", HUGE, "--data", "nowhere",
                        "--out", str(tmp_path / "o")], capsys)
    _refused(r, f"1..{MAX_EPOCHS}")
    r = run_cli_inproc(["build", "--budget", "3", "-w", "fmnist", "--finetune", HUGE, "--out", str(tmp_path / "o")],
                       capsys)
    _refused(r, f"0..{MAX_EPOCHS}")
    r = run_cli_inproc(["dataset", "-w", "fmnist", "--n", HUGE], capsys)
    _refused(r, f"1..{DATASET_N_MAX}")
    _no_user_workspaces()
    assert not (tmp_path / "o").exists()


def test_finetune_epochs_over_the_cap_is_refused_with_every_other_input_valid(tmp_path, capsys):
    """--epochs 10**20 with a real ImageFolder for --data (the cap test above gives --data
    nowhere, where the old code stops first): refused before any training, one line naming the
    value and 1..MAX_EPOCHS. (The old code accepted it and trained, with no end in sight.)"""
    data = image_folder(tmp_path / "data")
    r = run_cli_inproc(["finetune", "-w", "fmnist", "--arch", ARCH, "--epochs", HUGE, "--data", str(data),
                        "--export", "onnx", "--out", str(tmp_path / "o")], capsys)
    _refused(r, f"1..{MAX_EPOCHS}")
    _one_error_line(r, HUGE, f"1..{MAX_EPOCHS}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_dataset_n_over_the_cap_is_refused_on_a_users_own_workspace(tmp_path, capsys):
    """dataset --n 10**20 on a workspace of the user's own with no rows yet: refused, one line
    naming the value and 1..DATASET_N_MAX (nagkit.toml's cap on dataset.n), nothing written. (The
    old code accepted it and collected rows, with no end in sight.)"""
    ws = _fresh_user_workspace(tmp_path, capsys)
    before = tree_state(ws)
    r = run_cli_inproc(["dataset", "-w", str(ws), "--n", HUGE], capsys)
    _refused(r, f"1..{DATASET_N_MAX}")
    _one_error_line(r, HUGE, f"1..{DATASET_N_MAX}")
    assert tree_state(ws) == before
    _no_user_workspaces()
    assert run_cli_inproc(["dataset", "-w", str(ws), "--n", "5"], capsys).code == 0  # only --n was wrong


# ---- item 5: over-long names ---------------------------------------------------------------

@pytest.mark.parametrize("length", [300, 100_000])
def test_an_over_long_workspace_name_is_one_short_line(length, capsys):
    name = "a" * length
    for argv in (["generate", "-w", name, "-b", "3"], ["init", name], ["build", "--budget", "3", "-w", name]):
        r = run_cli_inproc(argv, capsys)
        _refused(r)
        assert "[...]" in r.err or "..." in r.err, r.err  # echoed shortened, never whole
    _no_user_workspaces()


def test_an_over_long_init_destination_and_toml_latency_table(tmp_path, capsys):
    r = run_cli_inproc(["init", str(tmp_path / ("d" * 300))], capsys)
    _refused(r, "255")
    assert list(tmp_path.iterdir()) == []
    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", "fmnist"], capsys).code == 0
    cfg = ws / "nagkit.toml"
    cfg.write_text("\n".join(f'latency_table = "{"t" * 300}.json"' if ln.startswith("latency_table") else ln
                             for ln in cfg.read_text().splitlines()) + "\n")
    r = run_cli_inproc(["generate", "-w", str(ws), "-b", "3"], capsys)
    _refused(r, "latency table", "255")


@pytest.mark.parametrize("value", ["-1", str(2**40)])
def test_accuracy_option_seeds_share_the_range(value, tmp_path, capsys):
    """A supernet source's calib_seed reached numpy's default_rng unchecked (a raw ValueError, or a
    seed no other entry accepts)."""
    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", "fmnist"], capsys).code == 0
    cfg = ws / "nagkit.toml"
    cfg.write_text(cfg.read_text().replace("[accuracy_options]\n", f"[accuracy_options]\ncalib_seed = {value}\n", 1))
    r = run_cli_inproc(["generate", "-w", str(ws), "-b", "3"], capsys)
    _refused(r, "accuracy_options.calib_seed", f"0..{SEED_MAX}")


@pytest.mark.parametrize("cmd", ["build", "export", "dataset", "finetune"])
def test_an_over_long_out_is_one_short_line(cmd, tmp_path, capsys):
    argv = {"build": ["build", "--budget", "3", "-w", "fmnist"], "dataset": ["dataset", "-w", "fmnist", "--n", "3"],
            "export": ["export", "--space", "fmnist-mbv3-w0.5", "--arch", ARCH, "--random-init"],
            "finetune": ["finetune", "-w", "fmnist", "--arch", ARCH, "--epochs", "1", "--data", str(tmp_path)]}[cmd]
    r = run_cli_inproc([*argv, "--out", str(tmp_path / ("o" * 300))], capsys)
    _refused(r, "--out", "255", "...")
    assert "o" * 200 not in r.err  # echoed shortened
    assert list(tmp_path.iterdir()) == []
    _no_user_workspaces()
