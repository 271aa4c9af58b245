"""Workspaces: presets, nagkit.toml validation, path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagkit.data.synthetic import tiny_workspace_toml
from nagkit.errors import BadInputError
from nagkit.app.workspace import PRESETS_DIR, list_presets, load_workspace
from nagkit.resources import ROOT as RESOURCES


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
