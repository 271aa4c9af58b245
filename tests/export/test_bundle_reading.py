"""Reading a bundle that may be hostile or damaged (issue 13 D5, D13; issue 16 point 4): only the
files the manifest lists are extracted, none larger than listed; corrupt zips and manifests are
refused with one ArtifactError (exit 2), never a Python error."""

from __future__ import annotations

import json
import shutil
import stat
import zipfile

import pytest

from nagkit.errors import EXIT_BAD_INPUT, ArtifactError, exit_code_for
from nagkit.export.bundle import make_manifest, read_bundle, safe_extract, write_bundle
from nagkit.export.zipfiles import MAX_MANIFEST_BYTES


@pytest.fixture(scope="module")
def bundle_zip(tmp_path_factory, tiny_export):
    sp, arch, _, res = tiny_export
    out = tmp_path_factory.mktemp("bz") / "b"
    b = write_bundle(out, {"onnx": res.paths["onnx"]}, make_manifest(sp, arch, export=res, weights_sha256="0" * 64))
    return b.zip_path


def _copy_with(src, dst, extra=(), replace=None):
    """A copy of zip ``src`` with entries replaced (``replace``: name -> bytes) and ``extra`` added."""
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, replace.get(info.filename, zin.read(info)))
        for name, data in extra:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            zout.writestr(info, data)
    return dst


def _refused(path, match):
    with pytest.raises(ArtifactError, match=match) as ei:
        read_bundle(path)
    assert exit_code_for(ei.value) == EXIT_BAD_INPUT
    return ei.value


def _declare_size(zip_path, name, size):
    """Make the zip's central directory declare ``size`` bytes for ``name`` (a few bytes changed:
    a zip bomb's directory, without writing gigabytes)."""
    import struct

    data = bytearray(zip_path.read_bytes())
    at = 0
    while True:
        at = data.find(b"PK\x01\x02", at)
        assert at >= 0, name
        n = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + n].decode() == name:
            struct.pack_into("<I", data, at + 24, size)
            break
        at += 4
    zip_path.write_bytes(bytes(data))
    with zipfile.ZipFile(zip_path) as zf:
        assert zf.getinfo(name).file_size == size


def _no_extraction(monkeypatch):
    """Fail the test if anything is extracted (the refusal must come from the directory alone)."""
    import nagkit.export.bundle as bundle_mod

    monkeypatch.setattr(bundle_mod, "extract_entry", lambda *a, **k: pytest.fail("an entry was extracted"))


@pytest.mark.parametrize("declared", [1 << 30, 10])
def test_issue35_an_unlisted_entry_is_refused_before_anything_is_extracted(bundle_zip, tmp_path, monkeypatch,
                                                                           declared):
    """`nagkit check` passed a zip holding an unlisted 1 GiB entry: the rule is now "unlisted
    entry -> refuse", whatever its size (declared 1 GiB here, in a zip of a few KB)."""
    bad = _copy_with(bundle_zip, tmp_path / "extra.zip", extra=[("b/junk.bin", b"0123456789")])
    if declared != 10:
        _declare_size(bad, "b/junk.bin", declared)
    _no_extraction(monkeypatch)
    _refused(bad, "holds 'b/junk.bin', which its manifest does not list")


def test_issue35_check_refuses_a_bundle_zip_with_an_unlisted_entry(bundle_zip, tmp_path, capsys):
    from tests.cli.helpers import run_cli_inproc

    bad = _copy_with(bundle_zip, tmp_path / "extra.zip", extra=[("b/notes.txt", b"mine")])
    r = run_cli_inproc(["check", str(bad)], capsys)
    assert r.code == 2 and "which its manifest does not list" in r.err and r.out == "", r.err
    assert run_cli_inproc(["check", str(bundle_zip)], capsys).code == 0  # the bundle as written still passes


def _with_listed_size(bundle_zip, dst, size):
    with zipfile.ZipFile(bundle_zip) as zf:
        man = json.loads(zf.read("b/manifest.json"))
    man["files"]["model.onnx"]["size_bytes"] = size
    return _copy_with(bundle_zip, dst, replace={"b/manifest.json": json.dumps(man).encode()})


def test_issue35_declared_sizes_are_checked_before_extracting(bundle_zip, tmp_path, monkeypatch):
    """A 7 MB zip whose manifest lists a 3.5 GiB model wrote and hashed 3.5 GiB (32 s) before
    refusing: the manifest's size, the zip's declared size and the cap are compared first."""
    _no_extraction(monkeypatch)
    huge = 3584 << 20
    bomb = _with_listed_size(bundle_zip, tmp_path / "bomb.zip", huge)
    _declare_size(bomb, "b/model.onnx", huge)
    _refused(bomb, "at 3,758,096,384 bytes; a model file has at most 2,147,483,647")
    with zipfile.ZipFile(bundle_zip) as zf:
        real = zf.getinfo("b/model.onnx").file_size
    other = _copy_with(bundle_zip, tmp_path / "other.zip")
    _declare_size(other, "b/model.onnx", real + 1)
    _refused(other, f"is declared {real + 1:,} bytes in the zip, but its manifest says {real:,}")


def test_a_listed_file_larger_than_its_manifest_says_is_refused(bundle_zip, tmp_path):
    with zipfile.ZipFile(bundle_zip) as zf:
        model = zf.read("b/model.onnx")
    bad = _copy_with(bundle_zip, tmp_path / "big.zip", replace={"b/model.onnx": model + bytes(4096)})
    _refused(bad, "but its manifest says")


@pytest.mark.parametrize("extra", [
    [("b/model.onnx/x", b"1")],  # a file and a folder of the same name (D5)
    [("b/manifest.json/", b"")],
])
def test_file_and_folder_of_the_same_name(bundle_zip, tmp_path, extra):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = _copy_with(bundle_zip, tmp_path / "ff.zip", extra=extra)
    _refused(bad, "both a file and a folder")
    with pytest.raises(ArtifactError, match="both a file and a folder"):
        safe_extract(bad, tmp_path / "out")


def test_end_record_only_and_bad_crc(bundle_zip, tmp_path):
    """D5: a zip that is only its end record; a zip whose data fails its CRC."""
    empty = tmp_path / "empty.zip"
    empty.write_bytes(b"PK\x05\x06" + bytes(18))
    _refused(empty, "holds no bundle")
    data = bytearray(bundle_zip.read_bytes())
    with zipfile.ZipFile(bundle_zip) as zf:
        info = zf.getinfo("b/model.onnx")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF  # one byte of the compressed model
    crc = tmp_path / "crc.zip"
    crc.write_bytes(bytes(data))
    _refused(crc, "corrupt")


def test_deeply_nested_or_huge_manifest(bundle_zip, tmp_path):
    """D5: a deeply nested manifest is refused by name, never a RecursionError; so is a huge one."""
    with zipfile.ZipFile(bundle_zip) as zf:
        m = json.loads(zf.read("b/manifest.json"))
    deep_text = json.dumps(m)[:-1] + ', "build": ' + "[" * 100_000 + "]" * 100_000 + "}"
    bad = _copy_with(bundle_zip, tmp_path / "deep.zip", replace={"b/manifest.json": deep_text.encode()})
    _refused(bad, "nested")
    mid = json.dumps(dict(m, build={"a": json.loads("[" * 20 + "1" + "]" * 20)}))
    _refused(_copy_with(bundle_zip, tmp_path / "mid.zip", replace={"b/manifest.json": mid.encode()}), "nested deeper")
    huge = json.dumps(dict(m, notes=["x" * (MAX_MANIFEST_BYTES + 1)]))
    _refused(_copy_with(bundle_zip, tmp_path / "huge.zip", replace={"b/manifest.json": huge.encode()}), "limit|at most")


def test_folder_bundle_manifest_limits(bundle_zip, tmp_path):
    with read_bundle(bundle_zip) as b:
        shutil.copytree(b.root, tmp_path / "f")
    (tmp_path / "f" / "manifest.json").write_text("[" * 50_000 + "]" * 50_000)
    _refused(tmp_path / "f", "nested")
    (tmp_path / "f" / "manifest.json").write_text("{not json")
    _refused(tmp_path / "f", "not valid JSON")


def test_an_older_schema_is_named(bundle_zip, tmp_path):
    with zipfile.ZipFile(bundle_zip) as zf:
        m = json.loads(zf.read("b/manifest.json"))
    old = _copy_with(bundle_zip, tmp_path / "old.zip",
                     replace={"b/manifest.json": json.dumps(dict(m, schema="nagkit.bundle/1")).encode()})
    err = _refused(old, "nagkit.bundle/1")
    assert "rebuild" in err.hint


def test_a_listed_file_missing_from_the_zip(bundle_zip, tmp_path):
    with zipfile.ZipFile(bundle_zip) as zin, zipfile.ZipFile(tmp_path / "m.zip", "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("model.onnx"):
                zout.writestr(info, zin.read(info))
    _refused(tmp_path / "m.zip", "does not hold it")
