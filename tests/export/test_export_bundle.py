"""Bundles: folder + zip, manifest schema, --force, safe zip extraction."""

from __future__ import annotations

import json
import os
import stat
import zipfile

import numpy as np
import pytest
import torch

from nagkit.errors import ArtifactError, BadInputError
from nagkit.export.bundle import (RANDOM_INIT_NOTE, make_manifest, read_bundle, safe_extract, verify_bundle,
                                  write_bundle, zip_path_for)
from nagkit.export.manifest import UNVERIFIED_NOTE, accuracy_record
from nagkit.export.parity import ParityError
from nagkit.supernet import StaticNet
from nagkit.export.exporter import export_model
from nagkit.runtimes.models import load_model
from nagkit.export.schema import MANIFEST_SCHEMA_PATH, Validator, validate_manifest


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A real (tiny) StaticNet exported to ONNX, plus its space and arch."""
    from nagkit.space import SearchSpace
    from nagkit.supernet import StaticNet

    sp = SearchSpace(name="tiny-bundle", width_mult=0.5, base_stage_width=(16, 16, 24, 40, 80, 112, 160, 240, 320),
                     resolutions=(32,), n_classes=10, dropout=0.0, labels=tuple(f"class{i}" for i in range(10)))
    arch = sp.smallest()
    net = StaticNet.from_arch(sp, arch, seed=0)
    res = export_model(net, (1, 3, 32, 32), "onnx", tmp_path_factory.mktemp("exp"))
    return sp, arch, net, res


@pytest.mark.slow
def test_bundle_with_both_formats_has_litert_and_onnx_snippets(tiny_export, tmp_path):
    sp, arch, net, res = tiny_export
    b = write_bundle(tmp_path / "b", res.paths, make_manifest(sp, arch, export=res, weights_sha256="0" * 64))
    readme = (b.root / "README.md").read_text()
    assert "ai_edge_litert" in readme and "onnxruntime" in readme
    with read_bundle(b.zip_path) as rb:
        assert set(rb.models) == {"onnx", "tflite"}
        for n in ("model.onnx", "model.tflite"):
            p = rb.manifest["files"][n]["parity"]
            assert p["passed"] and p["max_abs_diff"] <= p["tolerance"]
        x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
        ref = net(torch.from_numpy(x)).detach().numpy()
        for path in rb.models.values():
            assert np.abs(load_model(path).run(x) - ref).max() <= 1e-4 * max(1, np.abs(ref).max())
    rep = verify_bundle(b.zip_path, net, seed=5)
    assert set(rep["models"]) == {"onnx", "tflite"} and rep["cross_runtime"]["passed"]
    assert all(m["parity"]["passed"] and m["output_shape"] == [1, 10] for m in rep["models"].values())
    with pytest.raises(ParityError):  # another network's weights do not match these models
        verify_bundle(b.root, StaticNet.from_arch(sp, arch, seed=1))


def _manifest(exported, **kw):
    sp, arch, _, res = exported
    return make_manifest(sp, arch, export=res, **kw)


def test_write_and_read_bundle_folder_and_zip(exported, tmp_path):
    sp, arch, net, res = exported
    from nagkit.devices.base import LatencyStats

    stats = LatencyStats.from_samples([2.0, 2.1, 2.2, 2.05, 1.95])
    table = {"spec": "latency_tables/t.json", "sha256": "cd" * 32, "device": {"model": "ref cpu"},
             "runtime": {"name": "litert", "threads": 1}}
    acc = accuracy_record(0.71, dataset="synthetic", split="val", images=500, evaluated="PyTorch subnet",
                          source="supernet eval (synthetic)")
    fields = _manifest(exported, weights_sha256="ab" * 32, weights_source="sn.pth", budget_ms=3.0, device="cpu",
                       predicted={"ms": 2.3, "source": "latency table", "table": table}, measured=stats,
                       accuracy=acc, seed=3, build={"workspace": "ws", "candidates_tried": 2})
    out = tmp_path / "b"
    b = write_bundle(out, res.paths, fields)
    assert b.root == out and b.zip_path == tmp_path / "b.zip"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "manifest.json", "model.onnx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "b.zip"]  # no temp leftovers
    m = json.loads((out / "manifest.json").read_text())
    validate_manifest(m)
    assert m["arch"] == {"canonical": str(arch), "ofa": sp.to_ofa_dict(arch), "params": sp.params(arch),
                         "macs": sp.macs(arch)}
    assert m["latency"]["measured"]["median_ms"] == pytest.approx(stats.median_ms)
    assert m["latency"]["measured"]["device"] == "cpu" and m["latency"]["status"] == "measured"
    assert m["latency"]["predicted"]["table"] == table  # the table and the device it was measured on
    assert m["accuracy"] == dict(acc, others=[]) and m["accuracy"]["split"] == "val" and m["accuracy"]["images"] == 500
    assert m["weights"] == {"sha256": "ab" * 32, "source": "sn.pth", "note": None, "fine_tuned": None}
    assert m["budget_ms"] == 3.0 and m["device"] == {"spec": "cpu"}
    assert m["input"]["shape"] == [1, 3, 32, 32] and m["input"]["layout"] == "NCHW" and m["input"]["name"] == "image"
    assert m["input"]["preprocessing"] == sp.preprocessing(32)  # what the space declares (ImageNet's by default)
    assert m["output"]["n_classes"] == 10 and m["output"]["labels"][3] == "class3" and m["output"]["name"] == "logits"
    assert m["files"]["model.onnx"]["parity"]["passed"] is True
    assert {"nagkit", "torch", "litert", "onnxruntime"} <= set(m["versions"])
    assert m["build"] == {"workspace": "ws", "candidates_tried": 2} and m["seed"] == 3
    readme = (out / "README.md").read_text()
    assert "onnxruntime" in readme and "InferenceSession" in readme and "(1, 3, 32, 32)" in readme
    assert "def preprocess(path):" in readme and "the shorter side to 37, then center-crop 32x32" in readme
    assert "Latency: median" in readme and "71.00% top1 on synthetic, split val, 500 images" in readme

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = net(torch.from_numpy(x)).detach().numpy()
    for src in (out, b.zip_path):
        with read_bundle(src) as rb:
            assert rb.manifest == m
            y = load_model(rb.models["onnx"]).run(x)
            assert np.abs(y - ref).max() <= 1e-4 * max(1, np.abs(ref).max())
            root = rb.root
    assert not root.exists() or root == out  # a zip's temporary folder is removed on close


def test_preprocessing_is_the_spaces_declaration():
    from nagkit.export.manifest import make_manifest as mk
    from nagkit.space import get_space

    fm = get_space("fmnist-mbv3-w0.5")
    m = mk(fm, fm.smallest(36))
    assert m["input"]["preprocessing"] == fm.preprocessing(36) and m["input"]["preprocessing"]["resize_rule"] == "whole"
    assert m["input"]["shape"] == [1, 1, 36, 36] and m["output"]["labels"][0] == "T-shirt/top"


def test_random_init_manifest_says_latency_only(exported, tmp_path):
    b = write_bundle(tmp_path / "r", exported[3].paths, _manifest(exported))
    assert b.manifest["weights"] == {"sha256": "random-init", "source": None, "note": RANDOM_INIT_NOTE,
                                     "fine_tuned": None}
    assert b.manifest["latency"] == {"predicted": None, "measured": None, "status": "unverified",
                                     "note": UNVERIFIED_NOTE}
    assert UNVERIFIED_NOTE in b.manifest["notes"] and "Latency: unverified" in (tmp_path / "r" / "README.md").read_text()
    assert "only good for latency checks" in (tmp_path / "r" / "README.md").read_text()
    bad = dict(b.manifest, weights={"sha256": "random-init", "source": None, "note": None, "fine_tuned": None})
    with pytest.raises(ArtifactError, match="latency checks"):
        validate_manifest(bad)


def test_existing_bundle_needs_force(exported, tmp_path):
    res = exported[3]
    out = tmp_path / "b"
    first = write_bundle(out, res.paths, _manifest(exported, budget_ms=5.0))
    with pytest.raises(BadInputError, match="already exist") as ei:
        write_bundle(out, res.paths, _manifest(exported, budget_ms=6.0))
    assert "--force" in ei.value.hint
    assert json.loads((out / "manifest.json").read_text())["budget_ms"] == 5.0  # untouched
    (out / "stale.txt").write_text("a file the user put there")
    with pytest.raises(BadInputError, match="stale.txt"):  # --force replaces only what nagkit wrote (decisions 36)
        write_bundle(out, res.paths, _manifest(exported, budget_ms=6.0), force=True)
    assert (out / "stale.txt").is_file() and json.loads((out / "manifest.json").read_text())["budget_ms"] == 5.0
    (out / "stale.txt").unlink()
    second = write_bundle(out, res.paths, _manifest(exported, budget_ms=6.0), force=True)
    assert json.loads((out / "manifest.json").read_text())["budget_ms"] == 6.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "b.zip"]
    assert first.manifest["files"] == second.manifest["files"]
    # a zip alone also blocks
    os.rename(zip_path_for(out), tmp_path / "keep.zip")
    import shutil

    shutil.rmtree(out)
    os.rename(tmp_path / "keep.zip", zip_path_for(out))
    with pytest.raises(BadInputError, match="b.zip"):
        write_bundle(out, res.paths, _manifest(exported))


def test_invalid_manifest_is_refused_and_nothing_written(exported, tmp_path):
    fields = _manifest(exported)
    fields["input"]["layout"] = "CHWN"
    fields["arch"]["ofa"]["r"] = "big"
    with pytest.raises(ArtifactError) as ei:
        write_bundle(tmp_path / "b", exported[3].paths, fields)
    assert "$.input.layout" in ei.value.message and "$.arch.ofa.r: expected integer" in ei.value.message
    assert list(tmp_path.iterdir()) == []


def test_accuracy_records_need_a_finite_fraction(exported):
    assert _manifest(exported)["accuracy"] is None
    for bad in (float("nan"), 1.5, -0.1):
        with pytest.raises(BadInputError, match="fraction"):
            accuracy_record(bad, dataset="d", split="val", images=10, evaluated="x", source="y")


def test_nan_in_manifest_is_refused(exported, tmp_path):
    with pytest.raises(BadInputError, match="NaN"):
        write_bundle(tmp_path / "b", exported[3].paths, _manifest(exported, budget_ms=float("nan")))
    assert list(tmp_path.iterdir()) == []


def test_schema_validator_reports_paths():
    v = Validator(json.loads(MANIFEST_SCHEMA_PATH.read_text()))
    errs = v.errors({"schema": "nagkit.bundle/1", "extra": 1})
    text = "\n".join(errs)
    assert "$: missing required field 'arch'" in text
    assert "$.schema: must be \"nagkit.bundle/2\"" in text
    assert "unexpected field 'extra'" in text
    with pytest.raises(ValueError, match="not supported"):
        Validator({"type": "object", "oneOf": []})


def test_read_bundle_detects_tampered_model(exported, tmp_path):
    b = write_bundle(tmp_path / "b", exported[3].paths, _manifest(exported))
    data = bytearray((b.root / "model.onnx").read_bytes())
    data[-1] ^= 0xFF
    (b.root / "model.onnx").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="corrupt: sha256"):
        read_bundle(b.root)
    with open(b.root / "model.onnx", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ArtifactError, match="bytes; the manifest says"):
        read_bundle(b.root)
    with pytest.raises(BadInputError, match="does not exist"):
        read_bundle(tmp_path / "nope")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ArtifactError, match="neither a bundle folder nor a zip"):
        read_bundle(tmp_path / "x.txt")


def _zip_with(path, entries):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize("name, mode, why", [
    ("../evil.txt", stat.S_IFREG | 0o644, "contains '..'"),
    ("b/../../evil.txt", stat.S_IFREG | 0o644, "contains '..'"),
    ("/tmp/evil.txt", stat.S_IFREG | 0o644, "absolute path"),
    ("C:/evil.txt", stat.S_IFREG | 0o644, "absolute path"),
    ("b\\..\\evil.txt", stat.S_IFREG | 0o644, "backslashes"),
    ("b/link", stat.S_IFLNK | 0o777, "symlink"),
])
def test_malicious_zip_is_refused(tmp_path, name, mode, why):
    evil = _zip_with(tmp_path / "evil.zip", [("b/manifest.json", b"{}", stat.S_IFREG | 0o644),
                                             (name, b"/etc/passwd" if "link" in name else b"pwned", mode)])
    dest = tmp_path / "x" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(ArtifactError, match=why):
        safe_extract(evil, dest)
    assert list(dest.iterdir()) == []  # nothing extracted, not even the good entry
    assert not (tmp_path / "x" / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    with pytest.raises(ArtifactError, match="refusing zip"):
        read_bundle(evil)


def test_duplicate_and_corrupt_zips(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        dup = _zip_with(tmp_path / "dup.zip", [("a.txt", b"1", stat.S_IFREG | 0o644),
                                                ("a.txt", b"2", stat.S_IFREG | 0o644)])
    with pytest.raises(ArtifactError, match="twice"):
        safe_extract(dup, tmp_path / "d")
    trunc = tmp_path / "t.zip"
    trunc.write_bytes(b"PK\x03\x04" + b"\0" * 20)
    with pytest.raises(ArtifactError):
        read_bundle(trunc)


def test_d7_two_concurrent_writers_of_one_bundle_never_both_succeed(exported, tmp_path, monkeypatch):
    """Issue 13 D7: writer B starts while writer A is in the middle of writing bundle X. Exactly
    one reports success, the other is refused naming X, and X is the winner's bundle."""
    import threading
    import time

    from nagkit.export import bundle as bmod

    res, out = exported[3], tmp_path / "b"
    a_inside, b_moved = threading.Event(), threading.Event()
    real_zip, real_sleep = bmod.write_zip, time.sleep

    def zip_a_waits_for_b(folder, zip_path, top):
        if threading.current_thread().name == "A":
            a_inside.set()
            b_moved.wait(60)  # until B has written its bundle (no lock) or waits for the lock
        real_zip(folder, zip_path, top)

    def sleep_marks_b(s):
        if threading.current_thread().name == "B":
            b_moved.set()  # B is polling for the lock
        real_sleep(s)

    monkeypatch.setattr(bmod, "write_zip", zip_a_waits_for_b)
    monkeypatch.setattr(time, "sleep", sleep_marks_b)
    outcome: dict[str, str] = {}

    def writer(budget: float) -> None:
        name = threading.current_thread().name
        try:
            write_bundle(out, res.paths, _manifest(exported, budget_ms=budget))
            outcome[name] = "ok"
        except BadInputError as e:
            outcome[name] = e.message
        finally:
            b_moved.set()

    a = threading.Thread(target=writer, args=(5.0,), name="A")
    a.start()
    assert a_inside.wait(60)
    b = threading.Thread(target=writer, args=(6.0,), name="B")
    b.start()
    a.join(120)
    b.join(120)
    assert outcome["A"] == "ok", outcome
    assert outcome["B"] != "ok" and "already exist" in outcome["B"] and str(out) in outcome["B"], outcome
    assert json.loads((out / "manifest.json").read_text())["budget_ms"] == 5.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "b.zip"]


def test_d5_bundle_out_below_an_existing_file_is_refused(exported, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(BadInputError, match="is a file, not a folder") as ei:
        write_bundle(tmp_path / "notes.txt" / "b", exported[3].paths, _manifest(exported))
    assert "notes.txt" in ei.value.message and "--out" in ei.value.hint
