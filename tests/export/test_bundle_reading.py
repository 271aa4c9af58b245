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


def test_unlisted_entries_are_not_extracted_even_a_huge_one(bundle_zip, tmp_path):
    """D13: a small zip holding a 1 GiB file the manifest does not list: nothing of it is written."""
    big = tmp_path / "big.zip"
    shutil.copy(bundle_zip, big)
    with zipfile.ZipFile(big, "a", zipfile.ZIP_DEFLATED) as zf, zf.open("b/junk.bin", "w", force_zip64=True) as f:
        zero = bytes(1 << 20)
        for _ in range(1024):
            f.write(zero)
    assert big.stat().st_size < 8 << 20
    with read_bundle(big) as b:
        assert sorted(p.name for p in b.root.iterdir()) == ["README.md", "manifest.json", "model.onnx"]


def test_a_listed_file_larger_than_its_manifest_says_is_refused(bundle_zip, tmp_path):
    with zipfile.ZipFile(bundle_zip) as zf:
        model = zf.read("b/model.onnx")
    bad = _copy_with(bundle_zip, tmp_path / "big.zip", replace={"b/model.onnx": model + bytes(4096)})
    _refused(bad, "more than its manifest says")


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
