"""Workspaces: presets, nagkit.toml validation, path resolution."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nagkit.data.synthetic import tiny_workspace_toml
from nagkit.errors import BadInputError
from nagkit.app.workspace import PRESETS_DIR, list_presets, load_workspace
from nagkit.resources import ROOT as RESOURCES
from tests.cli.helpers import run_cli_inproc
from tests.fuzzing import check_config, config_inputs, fuzz_examples, no_hang, run_campaign


def write_ws(tmp_path: Path, text: str) -> Path:
    (tmp_path / "nagkit.toml").write_text(text)
    return tmp_path


def test_preset_ofa_note10_binds_space_table_and_predictor():
    assert "ofa-note10" in list_presets()
    ws = load_workspace("ofa-note10")
    assert ws.space.name == "ofa-mbv3-w1.2"
    assert ws.accuracy_spec.startswith("ofa-predictor:")
    assert ws.ref == "ofa-note10"
    assert ws.artifact_path("generator").parent == PRESETS_DIR / "ofa-note10"
    assert ws.shipped


def test_missing_workspace_lists_presets_and_fix(tmp_path):
    with pytest.raises(BadInputError) as ei:
        load_workspace("ofa-note1")
    msg = str(ei.value)
    assert "did you mean 'ofa-note10'" in msg and "Presets:" in msg
    assert "nagkit init ofa-note1" in ei.value.hint


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(BadInputError, match="no nagkit.toml"):
        load_workspace(tmp_path)


def test_unknown_keys_get_did_you_mean(tmp_path):
    write_ws(tmp_path, tiny_workspace_toml().replace('seed = 0', 'seed = 0\nlatency_tabel = "x"'))
    with pytest.raises(BadInputError, match="did you mean 'latency_table'"):
        load_workspace(tmp_path)
    write_ws(tmp_path, tiny_workspace_toml(generator={"entropyy": 0.1}))
    with pytest.raises(BadInputError, match="did you mean 'entropy'"):
        load_workspace(tmp_path)


def test_wrong_value_type_is_named(tmp_path):
    write_ws(tmp_path, tiny_workspace_toml(generator={"steps": "many"}))
    with pytest.raises(BadInputError, match="steps"):
        load_workspace(tmp_path)


def test_inline_space_and_synthetic_sources(tmp_path):
    ws = load_workspace(write_ws(tmp_path, tiny_workspace_toml()))
    assert ws.space.name == "tiny" and ws.space.depth_list == (1, 2)
    src = ws.open_accuracy_source()
    acc = src.evaluate([ws.space.smallest(), ws.space.largest()])
    assert acc[1] > acc[0] and src.queries == 2
    assert ws.latency_table.predict(ws.space, ws.space.largest()) > ws.latency_table.predict(ws.space, ws.space.smallest())


def test_input_paths_resolve_against_workspace_then_shipped_data(tmp_path):
    ws = load_workspace(write_ws(tmp_path, tiny_workspace_toml()))
    (tmp_path / "here.txt").write_text("x")
    assert ws.resolve_input("here.txt") == (tmp_path / "here.txt").resolve()
    assert ws.resolve_input("latency_tables/note10.json") == (RESOURCES / "latency_tables" / "note10.json").resolve()
    assert ws.resolve_input("ofa/acc_predictor.pth") == (RESOURCES / "ofa" / "acc_predictor.pth").resolve()
    with pytest.raises(BadInputError, match="not found; looked in"):
        ws.resolve_input("nope/missing.pth", "predictor")


def test_missing_artifact_names_the_fixing_command(tmp_path):
    from nagkit.errors import ArtifactError

    ws = load_workspace(write_ws(tmp_path, tiny_workspace_toml()))
    with pytest.raises(ArtifactError) as ei:
        ws.require_artifact("generator")
    assert "nagkit train --workspace" in ei.value.hint


# --------------------------------------------------------------------------- presets stay as shipped


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def test_a_command_that_writes_to_a_preset_writes_to_the_users_copy(cli_env, tmp_path):
    from nagkit.app.workspace import user_workspaces_dir
    from tests.cli.helpers import run_cli

    before = _tree(PRESETS_DIR / "ofa-note10")
    shipped = len((PRESETS_DIR / "ofa-note10" / "dataset.jsonl").read_text().splitlines()) - 1  # NAG v3 ships it
    r = run_cli(["dataset", "--workspace", "ofa-note10", "--n", str(shipped + 20)], env=cli_env, cwd=tmp_path)
    assert r.code == 0, r.err
    assert _tree(PRESETS_DIR / "ofa-note10") == before  # the shipped preset is untouched
    copy = user_workspaces_dir() / "ofa-note10"
    assert "never modified" in r.err and str(copy) in r.err
    assert len((copy / "dataset.jsonl").read_text().splitlines()) == 1 + shipped + 20  # the shipped rows resumed
    ws = load_workspace("ofa-note10")  # the name finds the user's copy from now on
    assert ws.root == copy and not ws.shipped and ws.copied_from == "ofa-note10" and ws.ref == "ofa-note10"
    assert ws.latency_table.space_name == "ofa-mbv3-w1.2"  # inputs still come from the shipped data
    assert ws.open_accuracy_source().name == "ofa-predictor"
    r2 = run_cli(["dataset", "--workspace", "ofa-note10", "--n", str(shipped + 30)], env=cli_env, cwd=tmp_path)
    assert r2.code == 0 and "never modified" not in r2.err and "resuming" in r2.err


def test_init_makes_a_workspace_and_can_retarget_it(tmp_path):
    from nagkit.app.workspace import init_workspace, user_workspaces_dir
    from nagkit.resources import LATENCY_TABLES

    ws = init_workspace("mine", source="fmnist")
    assert ws.root == user_workspaces_dir() / "mine" and ws.ref == "mine" and ws.copied_from == "fmnist"
    assert ws.artifact_path("generator").is_file() and ws.supernet_path().parent == ws.root / "supernet"
    with pytest.raises(BadInputError, match="already holds a workspace"):
        init_workspace("mine", source="fmnist")
    other = init_workspace(tmp_path / "phone", source="ofa-cpu-w1.0",
                           latency_table=LATENCY_TABLES / "cpu-onnxruntime-1t-ofa-mbv3-w1.0.json")
    assert other.latency_table.runtime["name"] == "onnxruntime" and not other.artifact_path("generator").exists()
    narrowed = init_workspace("narrow", source="fmnist", latency_table=LATENCY_TABLES / "fmnist-cpu-litert.json",
                              resolutions=[28, 32])
    assert narrowed.space.resolutions == (28, 32) and narrowed.space.name == "fmnist-mbv3-w0.5"


def test_a_shipped_supernet_cache_is_read_never_written():
    ws = load_workspace("fmnist")
    assert ws.shipped
    src = ws.open_accuracy_source()
    assert src.cached(ws.space.parse_arch(_first_cached_arch(ws))) is not None
    assert src.provenance()["options"]["cache_readonly"] is True


def _first_cached_arch(ws) -> str:
    import json

    line = (ws.root / "supernet" / "acc.jsonl").read_text().splitlines()[1]
    return json.loads(line)["arch"]


BASE = tiny_workspace_toml()
# (name, nagkit.toml bytes, what the one-line error must name); issue 13 D5
BAD_TOML = [
    ("non-utf8", BASE.encode() + b"\n# \xff\xfe\n", "not UTF-8"),
    ("artifacts = 5", ("artifacts = 5\n" + BASE).encode(), "'artifacts' must be a table"),
    ("evaluator = 5", BASE.replace("[evaluator]\nepochs = 8\nhidden = 64\nbatch_size = 64\n", "")
     .replace("seed = 0\n", "seed = 0\nevaluator = 5\n").encode(), "'evaluator' must be a table"),
    ("accuracy_options", BASE.replace("seed = 0\n", 'seed = 0\naccuracy_options = "abc"\n').encode(),
     "'accuracy_options' must be a table"),
    ("dataset n", BASE.replace("[dataset]\nn = 600", '[dataset]\nn = "abc"').encode(), "'n' must be an integer"),
    ("dataset seed", BASE.replace("[dataset]\nn = 600", "[dataset]\nn = 600\nseed = 1.5").encode(),
     "'seed' must be an integer"),
    ("artifact value", BASE.replace("seed = 0\n", "seed = 0\n[artifacts]\ndataset = 5\n").encode(),
     "'dataset' must be a non-empty file name"),
    ("supernet = 5", BASE.replace("seed = 0\n", "seed = 0\nsupernet = 5\n").encode(), "'supernet' must be a string"),
    ("space width", BASE.replace("width_mult = 1.0", 'width_mult = "wide"').encode(), "field 'width_mult'"),
    ("space kernels", BASE.replace("ks_list = [3, 5]", 'ks_list = ["3", 5]').encode(), "field 'ks_list'"),
    ("space resolutions", BASE.replace("resolutions = [32, 48]", "resolutions = 32").encode(), "field 'resolutions'"),
    ("space acts", BASE.replace('stage_acts = ["relu", "h_swish", "h_swish"]', "stage_acts = [1, 2, 3]").encode(),
     "field 'stage_acts'"),
    ("space widths", BASE.replace("base_stage_width = [8, 8, 16, 24", "base_stage_width = [8, 8, 16.5, 24").encode(),
     "field 'base_stage_width'"),
    ("space stride 0", BASE.replace("stage_strides = [2, 2, 2]", "stage_strides = [0, 2, 2]").encode(),
     "field 'stage_strides'"),
    ("space name", BASE.replace('name = "tiny"\nwidth', "name = 5\nwidth").encode(), "field 'name'"),
    ("5,000-digit seed", BASE.replace("seed = 0\n", "seed = " + "9" * 5000 + "\n", 1).encode(), "too long to be real"),
    ("space without name", BASE.replace('name = "tiny"\nwidth', "width").encode(), "[space] has no name"),
    ("long unknown key", BASE.replace("seed = 0\n", "seed = 0\n" + "k" * 100_000 + " = 1\n", 1).encode(),
     "unknown key(s) 'kkkk"),
    ("deep", BASE.encode() + b"\n[x]\ndeep = " + b"[" * 20_000 + b"]" * 20_000 + b"\n", "nests too deeply"),
    ("100 KB name", BASE.replace('name = "tiny"\nlatency', 'name = "' + "x" * 100_000 + '"\nlatency', 1).encode(),
     "'name' is 100,000 characters long"),
    ("seed -1", BASE.replace("seed = 0\n", "seed = -1\n", 1).encode(), "'seed' -1 is not in 0..4294967295"),
    ("over 1 MiB", BASE.encode() + b"#" * (1 << 20), "nagkit reads at most 1,048,576"),
    # found by the issue 35 fuzz run: a long [artifacts] key with a bad value was echoed whole (5,906 characters)
    ("long artifact key", BASE.replace("seed = 0\n", "seed = 0\n[artifacts]\n" + "k9" * 3000 + " = 70\n", 1).encode(),
     "[artifacts]: 'k9k9"),
]


@pytest.mark.parametrize("text, needle", [c[1:] for c in BAD_TOML], ids=[c[0] for c in BAD_TOML])
def test_d5_bad_workspace_toml_is_one_line_exit_2_and_leaves_no_dataset(text, needle, tmp_path, capsys):
    from nagkit.cli.main import main

    (tmp_path / "nagkit.toml").write_bytes(text)
    rc = main(["dataset", "--workspace", str(tmp_path), "--n", "5"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert needle in err and err.startswith("error: ") and "Traceback" not in err and len(err) < 1000, err
    assert len([ln for ln in err.splitlines() if not ln.startswith("  hint:")]) == 1, err
    assert not (tmp_path / "dataset.jsonl").exists()  # nothing that would block the rerun


# ---- property tests (hypothesis; issue 13, the fourth parser: workspace TOML and device profiles) ----


@given(config_inputs())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_config_files_load_or_are_refused_with_one_short_nagkit_error(value):
    check_config(value)


@pytest.mark.slow
def test_config_long_fuzz_run():
    """NAGKIT_FUZZ_EXAMPLES inputs (default 500; benchmarks/fuzz/run_fuzz.py runs 100,000)."""
    camp = run_campaign("config", fuzz_examples(), seed=5)
    assert camp.failure_count == 0, camp.failures[:5]
    assert camp.inputs >= fuzz_examples() * 0.9


@pytest.mark.parametrize("section, line, needle", [
    ("evaluator", "epochs = -1", "epochs = -1 is out of range"),
    ("evaluator", "hidden = 0", "hidden = 0 is out of range"),
    ("evaluator", "lr = nan", "lr must be a finite number, got nan"),
    ("generator", "temperature = inf", "temperature"),
    ("budgets", "k = 1", "k = 1 is out of range"),
])
def test_d11_nag_settings_are_range_checked_when_loading(section, line, needle, tmp_path, capsys):
    """Issue 13 D11: values that trained with exit 0 into NaN, or failed only at train time, are
    refused when the workspace is read: one line, exit 2, nothing written."""
    from nagkit.cli.main import main

    key = line.split(" = ")[0]
    text = BASE
    if f"[{section}]\n" in text:
        lines = [ln for ln in text.split("\n") if not ln.startswith(key + " = ")]
        text = "\n".join(lines).replace(f"[{section}]\n", f"[{section}]\n{line}\n", 1)
    else:
        text += f"\n[{section}]\n{line}\n"
    (tmp_path / "nagkit.toml").write_text(text)
    rc = main(["train", "--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert needle in err and err.startswith("error: ") and "Traceback" not in err, err
    assert not any(p.name != "nagkit.toml" for p in tmp_path.iterdir())


# ---- issue 35 (second adversarial pass): init's names, targets, tables and modes; user paths ----

def _one_line_exit_2(r, *says):
    assert r.code == 2 and r.out == "" and "Traceback" not in r.err, (r.code, r.err)
    assert len([ln for ln in r.err.splitlines() if not ln.startswith("  hint:")]) == 1, r.err
    for s in says:
        assert s in r.err, (s, r.err)


def _user_workspaces():
    from nagkit.app.workspace import user_workspaces_dir

    d = user_workspaces_dir()
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


@pytest.mark.parametrize("name", ["😀", "a b", "tab\there", "-x", ".hidden", "a" * 101, "ok\x7f"])
def test_item6_init_refuses_a_bad_name_up_front_and_leaves_nothing(name, capsys):
    r = run_cli_inproc(["init", "--from", "fmnist", "--", name], capsys)
    _one_line_exit_2(r, "workspace name", "letters, digits")
    assert _user_workspaces() == []
    assert run_cli_inproc(["init", "good-name_1.2@x+y", "--from", "fmnist"], capsys).code == 0


@pytest.mark.parametrize("folder", ["😀", "quote\"back\\slash", "ctl\x01\x1f\x7f", "tab\tnew\nline", "ünï cødé"])
def test_item6_a_folder_path_of_any_name_makes_a_workspace_that_loads(folder, tmp_path, capsys):
    """`nagkit init 😀` wrote `name = "\\ud83d\\ude00"` (json.dumps), which TOML refuses: every
    later command failed on the workspace, `init --force` included."""
    dest = tmp_path / folder
    r = run_cli_inproc(["init", str(dest), "--from", "fmnist"], capsys)
    assert r.code == 0, r.err
    ws = load_workspace(dest)
    assert ws.name == folder and ws.root == dest
    assert run_cli_inproc(["init", str(dest), "--from", "fmnist", "--force"], capsys).code == 0
    assert run_cli_inproc(["generate", "-w", str(dest), "-b", "3", "--no-accuracy"], capsys).code == 0


def test_item6_a_config_that_does_not_load_is_never_renamed_into_place(tmp_path, monkeypatch):
    from nagkit.app import workspace as wsmod
    from nagkit.app.workspace import init_workspace

    monkeypatch.setattr(wsmod, "set_key", lambda text, key, value: text + f"\n{key} = \\q\n")  # invalid TOML
    with pytest.raises(BadInputError, match="not valid TOML"):
        init_workspace(tmp_path / "w", source="fmnist")
    assert list(tmp_path.iterdir()) == []  # no workspace, no temporary folder


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_item6_toml_string_round_trips_any_text(text):
    import tomllib

    from nagkit.app.workspace_files import toml_string

    assert tomllib.loads(f"k = {toml_string(text)}\n")["k"] == text


def test_item8_init_targets_that_cannot_be_a_workspace_are_one_line(tmp_path, capsys, monkeypatch):
    """An existing file, a path below a file, a non-empty folder, `.`, `..`, the folder the user
    is in, a folder that cannot be made: exit 2, one line, no raw OSError, nothing written."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("y")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [(str(tmp_path / "file"), "is not a folder"), (str(tmp_path / "file" / "sub"), "which is a file"),
             (str(tmp_path / "full"), "not a workspace"), ("/proc/nagkit-ws", "cannot make the workspace")]
    for dest, says in cases:
        _one_line_exit_2(run_cli_inproc(["init", dest, "--from", "fmnist"], capsys), says)
    monkeypatch.chdir(empty)  # an empty folder the user is in: replacing it would pull it from under them
    for dest in (".", "..", str(empty)):
        r = run_cli_inproc(["init", dest, "--from", "fmnist", "--force"], capsys)
        _one_line_exit_2(r)
        assert "folder you are in" in r.err or "not a workspace" in r.err, r.err
    assert list(empty.iterdir()) == [] and (tmp_path / "file").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "file", "full"]


def test_item8_init_latency_table_is_read_and_checked_before_anything_is_written(tmp_path, capsys):
    from nagkit.resources import LATENCY_TABLES

    bad = {"malformed.json": b'{"format": "nagkit-latency-table", ', "spaces.json": b" \n\t" * (2 << 20),
           "list.json": b"[1, 2]"}
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as f:
        f.truncate(300 << 20)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases = [(tmp_path / "malformed.json", "not valid JSON"), (tmp_path / "spaces.json", "not valid JSON"),
             (tmp_path / "list.json", "must be a JSON object"), (sparse, "is 314,572,800 bytes"),
             (fifo, "is a FIFO"), (Path("/dev/zero"), "is a character device"),
             (LATENCY_TABLES / "note10.json", "is for space 'ofa-mbv3-w1.2'")]
    for table, says in cases:
        with no_hang(30):
            r = run_cli_inproc(["init", str(tmp_path / "ws"), "--from", "fmnist", "--latency-table", str(table)],
                               capsys)
        _one_line_exit_2(r, says)
        assert not (tmp_path / "ws").exists()


def test_item8_init_follows_the_umask(tmp_path, capsys):
    import stat

    old = os.umask(0o027)
    try:
        assert run_cli_inproc(["init", str(tmp_path / "ws"), "--from", "fmnist"], capsys).code == 0
    finally:
        os.umask(old)
    root = tmp_path / "ws"
    modes = {p.relative_to(root).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}
    assert modes["."] == 0o750 and modes["supernet"] == 0o750, modes
    assert modes["nagkit.toml"] == 0o640 and modes["generator.pt"] == 0o640, modes
    assert all(m in (0o750, 0o640) for m in modes.values()), modes


def test_item7_workspace_paths_that_are_not_regular_files(tmp_path, capsys):
    """A FIFO as the workspace's latency_table hung `generate`; as nagkit.toml itself it was
    passed over for the default workspace."""
    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", "fmnist"], capsys).code == 0
    cfg = ws / "nagkit.toml"
    text = cfg.read_text()
    os.mkfifo(tmp_path / "t.json")
    for table, says in [(tmp_path / "t.json", "is a FIFO"), ("/dev/zero", "is a character device"),
                        (tmp_path, "is a folder")]:
        cfg.write_text("\n".join(f'latency_table = "{table}"' if ln.startswith("latency_table") else ln
                                 for ln in text.splitlines()) + "\n")
        with no_hang(30):
            r = run_cli_inproc(["generate", "-w", str(ws), "-b", "3"], capsys)
        _one_line_exit_2(r, "latency table", says)
    cfg.unlink()
    os.mkfifo(cfg)
    with no_hang(30):
        _one_line_exit_2(run_cli_inproc(["generate", "-w", str(ws), "-b", "3"], capsys), "is a FIFO")
        _one_line_exit_2(run_cli_inproc(["generate", "-w", str(cfg), "-b", "3"], capsys), "is a FIFO")


@pytest.mark.parametrize("cmd", [["generate", "-b", "3"], ["build", "--budget", "3", "--out", "OUT"],
                                 ["dataset", "--n", "5"]], ids=["generate", "build", "dataset"])
def test_item5_an_over_long_toml_latency_table_is_one_short_line(cmd, tmp_path, capsys):
    """A workspace of the user's own whose ``latency_table`` is a 300-character name: one short
    line, exit 2, naming the table and the 255 limit, the name shortened; nothing written. (The
    old code: a raw OSError "File name too long", exit 3, the name echoed whole.)"""
    ws = tmp_path / "ws"
    assert run_cli_inproc(["init", str(ws), "--from", "fmnist"], capsys).code == 0
    cfg = ws / "nagkit.toml"
    name = "t" * 300 + ".json"
    cfg.write_text("\n".join(f'latency_table = "{name}"' if ln.startswith("latency_table") else ln
                             for ln in cfg.read_text().splitlines()) + "\n")
    before = {p.relative_to(ws).as_posix(): p.stat().st_mtime_ns for p in ws.rglob("*")}
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in cmd]
    r = run_cli_inproc([*argv, "-w", str(ws)], capsys)
    assert r.code == 2 and r.out == "" and "Traceback" not in r.err, (r.code, r.err)
    errs = [ln for ln in r.err.splitlines() if ln.startswith("error:")]  # (dataset logs "resuming ..." first)
    assert len(errs) == 1 and all(s in errs[0] for s in ("latency table", "305 bytes", "at most 255")), r.err
    assert f"hint: fix the path in {cfg}" in r.err, r.err
    assert "t" * 200 not in r.err and len(r.err) < 1000, r.err  # the name shortened, never echoed whole
    assert {p.relative_to(ws).as_posix(): p.stat().st_mtime_ns for p in ws.rglob("*")} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    assert _user_workspaces() == []
