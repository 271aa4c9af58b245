"""Dataset collection: provenance, determinism, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.data.accuracy import open_accuracy_source
from nagkit.data.dataset import collect, load_dataset
from nagkit.data.synthetic import MacsLatencyTable, tiny_space
from nagkit.errors import ArtifactError

SP = tiny_space()
TABLE = MacsLatencyTable()


def _collect(path, n, seed=0, chunk=16):
    return collect(path, space=SP, table=TABLE, source=open_accuracy_source("synthetic:", SP), n=n, seed=seed,
                   table_prov=TABLE.provenance(), chunk=chunk)


def test_rows_and_header(tmp_path):
    ds = _collect(tmp_path / "d.jsonl", 40)
    lines = (tmp_path / "d.jsonl").read_text().splitlines()
    head, row = json.loads(lines[0]), json.loads(lines[1])
    assert head["space"] == "tiny" and head["seed"] == 0 and "nagkit_version" in head
    assert head["accuracy_source"]["name"] == "synthetic" and head["latency_table"]["kind"] == "synthetic"
    assert set(row) >= {"arch", "ofa", "latency_ms", "accuracy", "source"}
    assert len(ds) == 40 and len(lines) == 41
    a = SP.parse_arch(row["arch"])
    assert SP.parse_arch(row["ofa"]) == a
    assert row["latency_ms"] == pytest.approx(TABLE.predict(SP, a), abs=1e-5)


def test_same_seed_same_dataset_other_seed_differs(tmp_path):
    a = _collect(tmp_path / "a.jsonl", 30, seed=5)
    b = _collect(tmp_path / "b.jsonl", 30, seed=5)
    c = _collect(tmp_path / "c.jsonl", 30, seed=6)
    assert [str(x) for x in a.archs] == [str(x) for x in b.archs]
    assert [str(x) for x in a.archs] != [str(x) for x in c.archs]


def test_resume_continues_the_seeded_stream(tmp_path):
    full = tmp_path / "full.jsonl"
    _collect(full, 50, chunk=16)
    part = tmp_path / "part.jsonl"
    _collect(part, 20, chunk=16)
    with open(part, "a") as f:  # an interrupted write leaves a torn line
        f.write('{"i": 20, "arch": "r3')
    ds = _collect(part, 50, chunk=16)
    assert part.read_bytes() == full.read_bytes()
    assert len(ds) == 50


def test_resume_refuses_a_different_seed(tmp_path):
    p = tmp_path / "d.jsonl"
    _collect(p, 10, seed=0)
    with pytest.raises(ArtifactError, match="different seed"):
        _collect(p, 20, seed=1)


def test_corrupt_dataset_is_refused(tmp_path):
    p = tmp_path / "d.jsonl"
    _collect(p, 5)
    lines = p.read_text().splitlines()
    lines[3] = '{"arch": "r32-k9e9"'
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ArtifactError, match="line 4"):
        load_dataset(p, space=SP)
    assert np.isfinite(_collect(tmp_path / "ok.jsonl", 5).latency_ms).all()


def test_d5_a_header_only_file_from_a_failed_run_does_not_block_the_rerun(tmp_path):
    """Issue 13 D5: a run that failed before its first row leaves only a header; a rerun with
    fixed settings starts over instead of refusing 'collected with a different ...'."""
    p = tmp_path / "d.jsonl"
    _collect(p, 10, seed=0)
    p.write_text(p.read_text().splitlines()[0] + "\n")  # the header alone, as a failed run leaves it
    ds = _collect(p, 10, seed=1)
    assert len(ds) == 10 and json.loads(p.read_text().splitlines()[0])["seed"] == 1
    with pytest.raises(ArtifactError, match="different seed"):  # rows were collected: still refused
        _collect(p, 20, seed=2)


def test_d5_out_below_an_existing_file_is_refused(tmp_path):
    from nagkit.errors import BadInputError

    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(BadInputError, match="is a file, not a folder"):
        _collect(tmp_path / "notes.txt" / "d.jsonl", 5)
    assert (tmp_path / "notes.txt").read_text() == "x"
