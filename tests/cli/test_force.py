"""Issue 35, defect 1 (high): ``--force`` replaces only what nagkit wrote.

A folder holding a user's file, a link, a non-bundle zip beside it, or a non-workspace folder as
``init``'s destination is refused with exit 2, naming the folder, and nothing in it changes. A
real bundle (and an empty folder, where nothing can be lost) is still replaced."""

from __future__ import annotations

import json
import zipfile

import pytest

from nagkit.errors import BadInputError
from nagkit.export.bundle import check_bundle_target, zip_path_for

from .helpers import image_folder, run_cli_inproc

ARCH = "r28-" + "-".join(["k3e3.k3e3"] * 5)


def _user_folder(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "important.txt").write_text("x")
    return d


def _kept(d):
    assert (d / "important.txt").read_text() == "x"
    assert sorted(p.name for p in d.iterdir()) == ["important.txt"]


def _refused(r, d):
    assert r.code == 2, r.err
    assert r.out == "" and "Traceback" not in r.err
    errs = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and str(d) in errs[0] and "only a bundle nagkit wrote" in errs[0], r.err


@pytest.mark.parametrize("cmd", [
    ["build", "--budget", "3", "--export", "onnx", "--workspace", "fmnist"],
    ["finetune", "--workspace", "fmnist", "--arch", ARCH, "--epochs", "1", "--data", "nowhere"],
    ["export", "--space", "fmnist-mbv3-w0.5", "--arch", ARCH, "--random-init", "--format", "onnx", "--bundle"],
], ids=["build", "finetune", "export"])
def test_force_never_deletes_a_users_folder(cmd, tmp_path, capsys):
    d = _user_folder(tmp_path)
    r = run_cli_inproc([*cmd, "--force", "--out", str(d)], capsys)
    _refused(r, d)
    _kept(d)
    assert not zip_path_for(d).exists()


def test_finetune_force_with_valid_data_never_deletes_a_users_folder(tmp_path, capsys):
    """Every input valid (a real ImageFolder, the fmnist supernet, one epoch): ``--force --out`` a
    user's folder is refused before any training, and the folder keeps its file. (The old code
    trained, exported and replaced the folder with the bundle, exit 0.)"""
    d = _user_folder(tmp_path)
    data = image_folder(tmp_path / "data")
    r = run_cli_inproc(["finetune", "--workspace", "fmnist", "--arch", ARCH, "--epochs", "1", "--data", str(data),
                        "--export", "onnx", "--force", "--out", str(d)], capsys)
    left = sorted(p.name for p in d.iterdir()) if d.is_dir() else "(the folder is gone)"
    assert r.code == 2 and left == ["important.txt"], (r.code, r.err[-300:], {"left in the folder": left})
    _refused(r, d)
    assert "important.txt" in r.err
    _kept(d)
    assert not zip_path_for(d).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "data"]  # no work folder left beside it


def test_init_force_never_replaces_a_users_folder(tmp_path, capsys):
    """``init --force DIR`` where DIR holds a user's file (and no nagkit.toml): refused, exit 2,
    one line naming DIR, and the file survives. (The old code deleted DIR and wrote the workspace
    in its place, exit 0.)"""
    d = _user_folder(tmp_path)
    r = run_cli_inproc(["init", str(d), "--from", "fmnist", "--force"], capsys)
    left = sorted(p.name for p in d.iterdir()) if d.is_dir() else "(the folder is gone)"
    assert r.code == 2 and left == ["important.txt"], (r.code, r.err[-300:], {"left in the folder": left})
    assert r.out == "" and "Traceback" not in r.err, r.err
    errs = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and str(d) in errs[0] and "not a workspace" in errs[0], r.err
    assert "important.txt" in errs[0] and "--force" in errs[0], r.err
    _kept(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # no temporary copy left beside it


def _fake_bundle(d, extra=None):
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"schema": "nagkit.bundle/2"}))
    (d / "model.onnx").write_bytes(b"onnx")
    (d / "README.md").write_text("readme")
    if extra:
        (d / extra).write_text("mine")
    with zipfile.ZipFile(zip_path_for(d), "w") as zf:
        for p in sorted(d.iterdir()):
            zf.write(p, f"{d.name}/{p.name}")


def test_force_replaces_a_bundle_and_an_empty_folder_only(tmp_path):
    b = tmp_path / "b"
    _fake_bundle(b)
    check_bundle_target(b, force=True)  # a bundle: may be replaced
    e = tmp_path / "e"
    e.mkdir()
    check_bundle_target(e, force=True)  # empty: nothing to lose
    with pytest.raises(BadInputError, match="already exist"):
        check_bundle_target(b, force=False)

    u = tmp_path / "u"
    _fake_bundle(u, extra="notes.txt")  # a bundle the user added a file to
    with pytest.raises(BadInputError, match=r"'notes.txt'"):
        check_bundle_target(u, force=True)

    m = tmp_path / "m"
    m.mkdir()
    (m / "manifest.json").write_text(json.dumps({"schema": "someone-else/1"}))
    with pytest.raises(BadInputError, match="no nagkit bundle manifest"):
        check_bundle_target(m, force=True)

    z = tmp_path / "z"  # no folder, but z.zip is the user's own archive
    with zipfile.ZipFile(zip_path_for(z), "w") as zf:
        zf.writestr("photos/1.jpg", b"jpeg")
    with pytest.raises(BadInputError, match="is not a bundle zip"):
        check_bundle_target(z, force=True)
    assert zipfile.ZipFile(zip_path_for(z)).namelist() == ["photos/1.jpg"]

    (tmp_path / "t").mkdir()
    target = _user_folder(tmp_path / "t")
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    with pytest.raises(BadInputError, match="is a link"):
        check_bundle_target(link, force=True)
    _kept(target)


def test_init_force_never_replaces_a_folder_that_is_not_a_workspace(tmp_path, capsys, monkeypatch):
    d = _user_folder(tmp_path)
    for extra in ([], ["--force"]):
        r = run_cli_inproc(["init", str(d), "--from", "fmnist", *extra], capsys)
        assert r.code == 2 and "Traceback" not in r.err, r.err
        assert str(d) in r.err and "not a workspace" in r.err
        _kept(d)
    f = tmp_path / "file"
    f.write_text("y")
    r = run_cli_inproc(["init", str(f), "--from", "fmnist", "--force"], capsys)
    assert r.code == 2 and "is not a folder" in r.err and f.read_text() == "y"
    monkeypatch.chdir(d)
    for dot in (".", ".."):
        r = run_cli_inproc(["init", dot, "--from", "fmnist", "--force"], capsys)
        assert r.code == 2 and "Traceback" not in r.err and "not a workspace" in r.err, r.err
    _kept(d)
    # a workspace nagkit made is replaced with --force, and only with it
    w = tmp_path / "w"
    assert run_cli_inproc(["init", str(w), "--from", "fmnist"], capsys).code == 0
    assert run_cli_inproc(["init", str(w), "--from", "fmnist"], capsys).code == 2
    assert run_cli_inproc(["init", str(w), "--from", "fmnist", "--force"], capsys).code == 0
    e = tmp_path / "empty"
    e.mkdir()
    assert run_cli_inproc(["init", str(e), "--from", "fmnist"], capsys).code == 0
    assert (e / "nagkit.toml").is_file()
