"""nagkit.io: atomic writes (modes, no leftovers) and the capped safe-YAML loader."""

from __future__ import annotations

import os
import stat

import pytest

import re
from pathlib import Path

from nagkit.errors import ArtifactError, BadInputError, short_repr
from tests.fuzzing import no_hang
from nagkit.io import atomic_write_bytes, atomic_write_json, load_yaml_bytes, load_yaml_file


@pytest.fixture
def umask():
    """Set the process umask for one test (restored after)."""
    old = os.umask(0o022)
    os.umask(old)

    def set_(mask: int) -> None:
        os.umask(mask)

    yield set_
    os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_atomic_write_honours_the_umask_like_open(tmp_path, umask, mask):
    """D13: atomically written files were always 0600 whatever the umask."""
    umask(mask)
    p = atomic_write_json(tmp_path / "a.json", {"x": 1})
    with open(tmp_path / "plain.json", "w") as f:
        f.write("{}")
    assert _mode(p) == _mode(tmp_path / "plain.json") == 0o666 & ~mask


def test_atomic_write_explicit_mode_is_exact(tmp_path, umask):
    umask(0)
    p = atomic_write_bytes(tmp_path / "key", b"secret", mode=0o600)
    assert _mode(p) == 0o600 and p.read_bytes() == b"secret"
    umask(0o077)
    q = atomic_write_bytes(tmp_path / "script", b"#!/bin/sh\n", mode=0o755)
    assert _mode(q) == 0o755


def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path):
    p = tmp_path / "sub" / "f.bin"
    atomic_write_bytes(p, b"one")
    atomic_write_bytes(p, b"two")
    assert p.read_bytes() == b"two"
    assert sorted(x.name for x in p.parent.iterdir()) == ["f.bin"]

    with pytest.raises(TypeError):
        atomic_write_bytes(p, "not bytes")  # type: ignore[arg-type]
    assert p.read_bytes() == b"two" and sorted(x.name for x in p.parent.iterdir()) == ["f.bin"]


# --------------------------------------------------------------------------- safe YAML

BOMB = ("a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))
        + "description: *i\n")


def test_yaml_reads_plain_documents_and_legit_aliases(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("base: &m {warmup_runs: 3}\ndevice: cpu\nmeasure: *m\nlist: [1, 2.5, x]\n")
    assert load_yaml_file(p) == {"base": {"warmup_runs": 3}, "device": "cpu", "measure": {"warmup_runs": 3},
                                 "list": [1, 2.5, "x"]}


@pytest.mark.parametrize("doc, match", [
    (BOMB, "expands to more than"),                       # billion laughs, 340 bytes
    ("a: &a [*a]\n", "refers to a value that contains it"),
    ("x: " + "[" * 500 + "]" * 500, "nested more than 64 levels"),
    ("x: " + "[" * 100_000, "nested more than 64 levels"),
    ("x: " + "9" * 5000, "integer has more than 100 characters"),
    ("x: " + "1:" * 5000 + "1", "integer has more than 100 characters"),  # YAML 1.1 base 60
    ("- !!python/object/apply:os.system [echo hi]\n", "not valid YAML: could not determine a constructor"),
    (b"name: caf\xe9\n", "byte 0xe9 at position 9 is not valid utf-8"),
    ("a: [1,\n b: c\n" + "x" * 10_000, "not valid YAML"),
    ("a: 1\n---\nb: 2\n", "expected a single document"),
])
def test_yaml_hostile_documents_give_one_line_errors(doc, match):
    """D2 (loader part) / D13: alias bombs, deep nesting and YAML errors become one short line."""
    with pytest.raises(ArtifactError, match=match) as ei:
        load_yaml_bytes(doc, what="profile 'x.yaml'")
    msg = ei.value.message
    assert msg.startswith("profile 'x.yaml' ") and "\n" not in msg and len(msg) < 400


def test_yaml_alias_cap(tmp_path):
    doc = "a: &a 1\nb: [" + ", ".join(["*a"] * 50) + "]\n"
    assert len(load_yaml_bytes(doc, what="f")["b"]) == 50
    with pytest.raises(ArtifactError, match="more than 10 aliases"):
        load_yaml_bytes(doc, what="f", max_aliases=10)


def test_yaml_file_size_is_capped_before_parsing(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_bytes(b"x: " + b"a" * 5000 + b"\n")
    assert load_yaml_file(p, max_bytes=6000)["x"] == "a" * 5000
    with pytest.raises(ArtifactError, match="5,004 bytes; nagkit reads at most 1,000"):
        load_yaml_file(p, max_bytes=1000)
    with pytest.raises(ArtifactError, match="is a folder"):
        load_yaml_file(tmp_path)
    with pytest.raises(ArtifactError, match="does not exist"):  # one nagkit line (was a raw FileNotFoundError)
        load_yaml_file(tmp_path / "missing.yaml")


# --------------------------------------------------------------------------- short_repr (errors.py)


def test_short_repr_is_bounded_for_any_value():
    bomb = ["lol"]
    for _ in range(30):  # 10**30 leaves if expanded
        bomb = [bomb] * 10
    assert len(short_repr(bomb)) <= 80
    assert short_repr(10**5000) == "<int of about 5001 digits>"
    assert short_repr(-(10**100)) == "<negative int of about 101 digits>"
    s = short_repr("r224-" + "k3e4." * 200_000)
    assert len(s) <= 80 and s.startswith("'r224-k3e4.") and "[...]" in s
    assert short_repr("r224-k3e4") == "'r224-k3e4'" and short_repr({"a": [1, 2]}) == "{'a': [1, 2]}"


# --------------------------------------------------------------------------- user paths (issue 35, items 5, 7, 8)


@pytest.fixture
def odd_paths(tmp_path):
    """(path, what the refusal must say) for every kind of path that is not a readable file."""
    fifo = tmp_path / "table.json"
    os.mkfifo(fifo)
    link = tmp_path / "dangling.json"
    link.symlink_to(tmp_path / "nowhere")
    return [(fifo, "is a FIFO (named pipe), not a regular file"),
            (Path("/dev/zero"), "is a character device, not a regular file"),
            (tmp_path, "is a folder, not a regular file"),
            (tmp_path / "missing.json", "does not exist"),
            (link, "does not exist (a link to nowhere)"),
            (tmp_path / ("n" * 300), "has a name of 300 bytes; a file or folder name has at most 255"),
            (Path("/" + "d/" * 3000), "is 6,000 bytes long; a path has at most 4,095")]


def test_every_user_path_is_refused_unless_a_regular_file_in_one_short_line(odd_paths):
    """A FIFO hung every reader; /dev/zero never ends; both were called "does not exist"."""
    from nagkit.io import read_input_file

    for path, says in odd_paths:
        with pytest.raises(BadInputError) as ei:
            read_input_file(path, "latency table", max_bytes=1 << 20)
        msg = str(ei.value)
        assert msg.startswith("latency table '") and says in msg and len(msg) < 400, msg


def test_a_file_over_the_cap_is_refused_from_its_size_before_reading(tmp_path, monkeypatch):
    from nagkit.io import read_input_file

    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # sparse: 300 MB declared, nothing written
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda *a: pytest.fail("read before the size was checked") or real_read(*a))
    with pytest.raises(BadInputError, match="is 314,572,800 bytes; nagkit reads at most 1,024"):
        read_input_file(big, "thing", max_bytes=1024)
    monkeypatch.undo()
    (tmp_path / "ok.json").write_bytes(b"{}")
    assert read_input_file(tmp_path / "ok.json", "thing", max_bytes=2) == b"{}"


@pytest.mark.parametrize("reader", ["table", "profile", "toml", "arch", "checkpoint", "model", "bundle"])
def test_the_readers_of_user_files_share_the_rule(reader, tmp_path):
    """Every loader of a user's file goes through the one check (item 7): none hangs on a FIFO,
    none calls /dev/zero missing."""
    import functools

    from nagkit.app.workspace_config import _read_toml
    from nagkit.devices.profiles import load_profile
    from nagkit.export.bundle import read_bundle
    from nagkit.latency.table import LatencyTable
    from nagkit.runtimes.models import load_model
    from nagkit.space.arch import read_arch_arg
    from nagkit.supernet.checkpoint import read_checkpoint

    fn = {"table": LatencyTable.load, "profile": load_profile, "toml": _read_toml,
          "arch": lambda p: read_arch_arg("@" + str(p)), "checkpoint": read_checkpoint, "model": load_model,
          "bundle": functools.partial(read_bundle, verify=False)}[reader]
    fifo = tmp_path / "input.onnx"  # a suffix the model loader knows
    os.mkfifo(fifo)
    cases = [(fifo, "is a FIFO (named pipe), not a regular file")]
    if reader != "model":  # /dev/zero has no model suffix
        cases.append((Path("/dev/zero"), "is a character device, not a regular file"))
    with no_hang(20):
        for path, says in cases:
            with pytest.raises(BadInputError, match=re.escape(says)):
                fn(path)
