"""`nagkit export`: bad inputs (exit 2, one line, no traceback), exports, bundles, OFA golden acceptance."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ..shared_data import GOLDEN, needs_shared, read_json
from .helpers import run_cli, run_cli_inproc

CKPT = GOLDEN / "ofa_mbv3_d234_e346_k357_w1.0.golden.pth"
CASES = read_json(GOLDEN / "golden_cases.json")  # None without the shared data (the tests using it skip)
golden = needs_shared(GOLDEN)
SMALL = "r128-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3"


def case_arch_json(i: int, with_r: bool = True) -> str:
    if CASES is None:  # collected without the shared data: a placeholder for a test that skips
        return f"golden case {i} (shared data missing)"
    return json.dumps(dict(CASES[i]["config"], **({"r": CASES[i]["resolution"]} if with_r else {})))


def assert_bad_input(res, *needles: str) -> None:
    assert res.code == 2, (res.code, res.err)
    assert "Traceback" not in res.err and res.out == ""
    lines = [ln for ln in res.err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.err
    for n in needles:
        assert n in res.err, (n, res.err)


@golden
def test_unknown_space_suggests_the_close_name(capsys, tmp_path):
    res = run_cli_inproc(["export", "--weights", str(CKPT), "--space", "ofa-mbv3-w1.1", "--arch", SMALL,
                          "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "unknown space 'ofa-mbv3-w1.1'", "did you mean", "'ofa-mbv3-w1.0'", "nagkit space show")
    assert not (tmp_path / "o").exists()


@golden
@pytest.mark.parametrize("arch, needles", [
    ('{"ks": [3], "e": [3], "d": [2, 2, 2, 2, 2], "r": 160}', ["'ks'", "expected 20"]),
    (case_arch_json(1, with_r=False), ['"r"', "resolution"]),
    (case_arch_json(1).replace('"r": 160', '"r": 161'), ["r=161", "128..224"]),
    ("r160-k3e3.k9e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3", ["kernel", "= 9", "allowed kernels: 3, 5, 7"]),
    ('{"ks": [3', ["JSON", "does not parse"]),
])
def test_malformed_arch_names_the_field(capsys, tmp_path, arch, needles):
    res = run_cli_inproc(["export", "--weights", str(CKPT), "--arch", arch, "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, *needles)


def test_arch_from_missing_file(capsys, tmp_path):
    res = run_cli_inproc(["export", "--random-init", "--arch", f"@{tmp_path / 'none.json'}",
                          "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "none.json", "does not exist")


def test_missing_weights_file(capsys, tmp_path):
    res = run_cli_inproc(["export", "--weights", str(tmp_path / "nope.pth"), "--arch", SMALL,
                          "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "nope.pth", "does not exist")


@golden
def test_truncated_weights_file(capsys, tmp_path):
    trunc = tmp_path / "trunc.pth"
    trunc.write_bytes(CKPT.read_bytes()[: 200_000])
    res = run_cli_inproc(["export", "--weights", str(trunc), "--arch", SMALL, "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "trunc.pth", "truncated")


def test_non_checkpoint_weights_file(capsys, tmp_path):
    txt = tmp_path / "notes.pth"
    txt.write_text("these are not weights\n")
    res = run_cli_inproc(["export", "--weights", str(txt), "--arch", SMALL, "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "notes.pth", "not a PyTorch checkpoint")


@golden
def test_checkpoint_of_another_space(capsys, tmp_path):
    res = run_cli_inproc(["export", "--weights", str(CKPT), "--space", "ofa-mbv3-w1.2",
                          "--arch", SMALL.replace("r128", "r160"), "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "does not fit space 'ofa-mbv3-w1.2'", "--space ofa-mbv3-w1.0")


def test_weights_or_random_init_required_and_out_is_a_folder(capsys, tmp_path):
    res = run_cli_inproc(["export", "--arch", SMALL, "--out", str(tmp_path / "o")], capsys)
    assert_bad_input(res, "--weights CKPT", "--random-init")
    res = run_cli_inproc(["export", "--random-init", "--arch", SMALL, "--out", str(tmp_path / "m.tflite")], capsys)
    assert_bad_input(res, "is a folder", f"--out {tmp_path / 'm'}")


@golden
def test_bad_input_in_a_real_process_has_no_traceback(cli_env, tmp_path):
    trunc = tmp_path / "t.pth"
    trunc.write_bytes(CKPT.read_bytes()[:1000])
    res = run_cli(["export", "--weights", str(trunc), "--arch", SMALL, "--out", str(tmp_path / "o")], env=cli_env)
    assert_bad_input(res, "t.pth", "truncated")


@pytest.mark.slow
def test_random_init_bundle_and_force(capsys, tmp_path):
    out = tmp_path / "bundle"
    args = ["export", "--random-init", "--arch", SMALL, "--format", "onnx", "--out", str(out), "--bundle", "--json"]
    res = run_cli_inproc(args, capsys)
    assert res.code == 0, res.err
    r = json.loads(res.out)
    assert r["weights"] == "random-init" and r["bundle"]["zip"] == str(tmp_path / "bundle.zip")
    assert r["bundle_check"]["models"]["onnx"]["parity"]["passed"]  # the shipped zip was re-checked
    from nagkit.export.bundle import read_bundle
    from nagkit.space import get_space

    sp = get_space("ofa-mbv3-w1.0")
    with read_bundle(tmp_path / "bundle.zip") as b:
        assert b.manifest["weights"]["sha256"] == "random-init" and "latency" in b.manifest["weights"]["note"]
        assert b.manifest["arch"]["canonical"] == SMALL and b.manifest["arch"]["params"] == sp.params(sp.parse_arch(SMALL))
        assert set(b.models) == {"onnx"}
    assert r["params"] == r["params_module"] == sp.params(sp.parse_arch(SMALL))
    res = run_cli_inproc(args, capsys)
    assert_bad_input(res, "already exist", "--force")  # checked before any work is done


@golden
@pytest.mark.slow
def test_golden_case1_acceptance_both_formats(capsys, tmp_path):
    """Issue 2 acceptance: LiteRT and ONNX Runtime outputs on the case's x match OFA's y_sub."""
    out = tmp_path / "g1"
    res = run_cli_inproc(["export", "--weights", str(CKPT), "--space", "ofa-mbv3-w1.0", "--arch", case_arch_json(1),
                          "--format", "both", "--out", str(out), "--json"], capsys)
    assert res.code == 0, res.err
    r = json.loads(res.out)
    assert set(r["files"]) == {"onnx", "tflite"} and r["params"] == CASES[1]["subnet_params"]
    for f in ("onnx", "tflite"):
        assert r["files"][f]["parity_max_abs_diff"] <= r["files"][f]["parity_tolerance"]
    t = torch.load(GOLDEN / "golden_cases.pt", weights_only=True)["case1"]
    x, y_sub = t["x"].numpy(), t["y_sub"].numpy()
    tol = 1e-4 * max(1.0, float(np.abs(y_sub).max()))
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    y_onnx = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i : i + 1]})[0] for i in range(len(x))])
    interp = Interpreter(model_path=str(out / "model.tflite"))
    interp.allocate_tensors()
    inp, outp = interp.get_input_details()[0], interp.get_output_details()[0]
    ys = []
    for i in range(len(x)):
        interp.set_tensor(inp["index"], x[i : i + 1])
        interp.invoke()
        ys.append(interp.get_tensor(outp["index"]).copy())
    y_tfl = np.concatenate(ys)
    assert np.abs(y_onnx - y_sub).max() <= tol
    assert np.abs(y_tfl - y_sub).max() <= tol


@golden
@pytest.mark.slow
def test_golden_case5_onnx_with_batch_2(capsys, tmp_path, monkeypatch):
    """Mixed depths at r=128, exported with the golden input's batch of 2, to the default --out."""
    monkeypatch.chdir(tmp_path)
    res = run_cli_inproc(["export", "--weights", str(CKPT), "--arch", case_arch_json(5), "--format", "onnx",
                          "--batch", "2"], capsys)
    assert res.code == 0, res.err
    from nagkit.space import get_space

    arch = get_space("ofa-mbv3-w1.0").parse_arch(case_arch_json(5))
    out = tmp_path / "nagkit-export" / str(arch)
    assert "parity max|diff|" in res.out and f"nagkit-export/{arch}/model.onnx" in res.out
    from nagkit.runtimes.models import load_model

    t = torch.load(GOLDEN / "golden_cases.pt", weights_only=True)["case5"]
    m = load_model(out / "model.onnx")
    assert m.input_shape == (2, 3, 128, 128)
    y_sub = t["y_sub"].numpy()
    assert np.abs(m.run(t["x"].numpy()) - y_sub).max() <= 1e-4 * max(1.0, float(np.abs(y_sub).max()))


@golden
def test_d5_out_below_an_existing_file_exits_2_before_exporting(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    res = run_cli_inproc(["export", "--weights", str(CKPT), "--arch", SMALL, "--out",
                          str(tmp_path / "notes.txt" / "o")], capsys)
    assert_bad_input(res, "is a file, not a folder", "notes.txt")
