"""Runtimes (LiteRT, ONNX Runtime) and parity checks on small real models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.errors import ArtifactError, BadInputError, CheckFailedError
from nagkit.export.parity import ParityError, check_parity, compare, seeded_inputs, tolerance_for
from nagkit.runtimes.convert import to_onnx
from nagkit.runtimes.models import LiteRTModel, OnnxModel, load_model


def small_net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.Hardswish(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5),
    ).eval()


@pytest.fixture(scope="module")
def onnx_b1(tmp_path_factory):
    path = tmp_path_factory.mktemp("rt") / "m.onnx"
    net = small_net()
    to_onnx(net, torch.zeros(1, 3, 16, 16), path)
    return net, path


def test_onnx_model_runs_a_batch_of_n_by_looping_over_batch_1(onnx_b1):
    net, path = onnx_b1
    m = load_model(path)
    assert isinstance(m, OnnxModel) and m.input_shape == (1, 3, 16, 16) and m.batch == 1
    x = seeded_inputs((5, 3, 16, 16), seed=3)
    y = m.run(x)
    ref = net(torch.from_numpy(x)).detach().numpy()
    assert y.shape == (5, 5)
    assert np.abs(y - ref).max() <= tolerance_for(ref)


@pytest.mark.slow
def test_litert_model_runs_a_batch_and_matches_torch(tiny_export):
    _, _, net, res = tiny_export
    m = load_model(res.paths["tflite"], threads=1)
    assert isinstance(m, LiteRTModel) and m.input_shape == (1, 3, 32, 32)
    x = seeded_inputs((3, 3, 32, 32), seed=1)
    y = m.run(x)
    ref = net(torch.from_numpy(x)).detach().numpy()
    assert y.shape == (3, 10)
    assert np.abs(y - ref).max() <= tolerance_for(ref)
    res = check_parity(net, m, seed=7, n_inputs=2)
    assert res.passed and res.runtime == "litert" and res.seed == 7 and res.n_inputs == 2


def test_model_with_fixed_batch_refuses_a_non_multiple(tmp_path):
    path = tmp_path / "b2.onnx"
    to_onnx(small_net(), torch.zeros(2, 3, 16, 16), path)
    m = load_model(path)
    assert m.batch == 2
    assert m.run(np.zeros((4, 3, 16, 16), np.float32)).shape == (4, 5)
    with pytest.raises(BadInputError, match="not a multiple of .* fixed batch 2"):
        m.run(np.zeros((3, 3, 16, 16), np.float32))


def test_wrong_input_shape_names_both_shapes(onnx_b1):
    with pytest.raises(BadInputError, match=r"\(1, 3, 20, 20\).*\(1, 3, 16, 16\)"):
        load_model(onnx_b1[1]).run(np.zeros((1, 3, 20, 20), np.float32))


def test_load_model_bad_files(tmp_path):
    with pytest.raises(BadInputError, match="valid suffixes"):
        load_model(tmp_path / "m.pb")
    with pytest.raises(BadInputError, match="does not exist"):
        load_model(tmp_path / "missing.onnx")
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"not a flatbuffer at all" * 10)
    with pytest.raises(ArtifactError, match="LiteRT cannot load"):
        load_model(junk)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(ArtifactError, match="ONNX Runtime cannot load"):
        load_model(junk)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ArtifactError, match="empty"):
        load_model(empty)


def test_parity_passes_on_seeded_inputs_and_is_deterministic(onnx_b1):
    net, path = onnx_b1
    a = check_parity(net, path, seed=11, n_inputs=3)
    b = check_parity(net, path, seed=11, n_inputs=3)
    assert a.passed and a.seed == 11 and a.n_inputs == 3 and a.input_shape == (3, 3, 16, 16)
    assert a.max_abs_diff == b.max_abs_diff
    assert a.tolerance == pytest.approx(1e-4 * max(1.0, a.max_abs_ref))


def test_parity_failure_reports_diff_tolerance_and_seed(onnx_b1):
    """The exported model of one network against a differently initialised one must fail."""
    _, path = onnx_b1
    other = small_net(seed=1)
    with pytest.raises(ParityError) as ei:
        check_parity(other, path, seed=5)
    err = ei.value
    assert isinstance(err, CheckFailedError) and err.exit_code == 1
    r = err.result
    assert not r.passed and r.max_abs_diff > r.tolerance
    msg = err.message
    assert "seed 5" in msg and f"{r.max_abs_diff:.3g}" in msg and f"{r.tolerance:.3g}" in msg
    res = check_parity(other, path, seed=5, raise_on_fail=False)
    assert not res.passed


def test_parity_against_given_reference_outputs(onnx_b1):
    net, path = onnx_b1
    x = seeded_inputs((2, 3, 16, 16), seed=2)
    ref = net(torch.from_numpy(x)).detach().numpy()
    assert check_parity(None, path, inputs=x, reference=ref).seed is None
    bad = ref.copy()
    bad[0, 0] += 10 * tolerance_for(ref)
    with pytest.raises(ParityError, match="given inputs"):
        check_parity(None, path, inputs=x, reference=bad)


def test_compare_rules():
    ref = np.array([[100.0, -3.0]])
    assert compare(ref + 0.009, ref)[3]  # tolerance 1e-4 * 100 = 0.01
    assert not compare(ref + 0.011, ref)[3]
    small = np.array([[0.1, -0.2]])
    assert compare(small + 9e-5, small)[2] == pytest.approx(1e-4)  # max(1, .) floor
    assert not compare(np.array([[np.nan, 0.0]]), small)[3]
    with pytest.raises(CheckFailedError, match="shape"):
        compare(np.zeros((1, 3)), small)


def test_converter_output_never_reaches_stdout(capfd, tmp_path):
    """Results go to stdout; converters' chatter (Python and native, on fd 1 and 2) must not, nor
    the console unless -v; it is kept for error messages."""
    import logging
    import os

    from nagkit.runtimes import convert

    with convert._captured("test") as buf:
        print("python-level chatter")
        os.write(1, b"native chatter on fd 1\n")
        os.write(2, b"native chatter on fd 2\n")
    out, err = capfd.readouterr()
    assert "chatter" not in out and "chatter" not in err
    assert all(t in buf.getvalue() for t in ("python-level", "on fd 1", "on fd 2"))
    logging.getLogger("nagkit").setLevel(logging.INFO)  # -v
    try:
        with convert._captured("test"):
            os.write(2, b"shown with -v\n")
    finally:
        logging.getLogger("nagkit").setLevel(logging.NOTSET)
    assert "shown with -v" in capfd.readouterr().err
    print("result line")
    assert capfd.readouterr().out == "result line\n"  # fd 1 restored
