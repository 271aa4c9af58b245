"""Accuracy sources: spec parsing, query counting, output checks, OFA's predictor."""

from __future__ import annotations

import numpy as np
import pytest

from nagkit.data.accuracy import (AccuracySource, CallableAccuracySource, ofa_batch_encoding,
                                  open_accuracy_source)
from nagkit.data.synthetic import tiny_space
from nagkit.errors import BadInputError, CheckpointError, NagkitError, UnknownNameError
from nagkit.space import get_space, sample_many
from nagkit.resources import OFA
from nagkit.space.encoding import ofa_predictor_encoding

PREDICTOR = OFA / "acc_predictor.pth"  # the package's copy of OFA's predictor (the same file as ../shared's)


def test_spec_needs_scheme_and_known_scheme():
    sp = tiny_space()
    with pytest.raises(BadInputError, match="SCHEME:PATH"):
        open_accuracy_source("acc_predictor.pth", sp)
    with pytest.raises(UnknownNameError, match="did you mean 'ofa-predictor'"):
        open_accuracy_source("ofa-predictr:x.pth", sp)


def test_synthetic_source_counts_queries_and_follows_protocol():
    sp = tiny_space()
    src = open_accuracy_source("synthetic:", sp)
    assert isinstance(src, AccuracySource)
    archs = sample_many(sp, 7, seed=1)
    acc = src.evaluate(archs)
    assert acc.shape == (7,) and np.all((acc > 0) & (acc < 1))
    assert src.queries == 7
    src.evaluate(archs[:3])
    assert src.queries == 10
    src.reset_queries()
    assert src.queries == 0
    assert src.provenance()["name"] == "synthetic"


def test_out_of_range_accuracy_is_an_error_not_a_default():
    sp = tiny_space()
    src = CallableAccuracySource(sp, "test:", lambda archs: [1.5] * len(archs), name="broken")
    with pytest.raises(NagkitError, match="fractions in \\[0, 1\\]"):
        src.evaluate(sample_many(sp, 2, seed=0))
    assert src.queries == 0


def test_missing_predictor_file_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        open_accuracy_source(f"ofa-predictor:{tmp_path / 'none.pth'}", get_space("ofa-mbv3-w1.2"))


def test_wrong_predictor_shapes_are_refused(tmp_path):
    import torch

    p = tmp_path / "bad.pth"
    torch.save({"0.weight": torch.zeros(3, 5), "0.bias": torch.zeros(3)}, p)
    with pytest.raises(CheckpointError, match="not an MLP with one output"):
        open_accuracy_source(f"ofa-predictor:{p}", get_space("ofa-mbv3-w1.2"))
    torch.save({"0.weight": torch.zeros(1, 5), "0.bias": torch.zeros(1)}, p)
    with pytest.raises(CheckpointError, match="takes 5 inputs"):
        open_accuracy_source(f"ofa-predictor:{p}", get_space("ofa-mbv3-w1.2"))
    p.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read"):
        open_accuracy_source(f"ofa-predictor:{p}", get_space("ofa-mbv3-w1.2"))


def test_batch_encoding_matches_reference_encoding():
    sp = get_space("ofa-mbv3-w1.2")
    archs = sample_many(sp, 20, seed=3)
    ref = np.stack([ofa_predictor_encoding(sp, a) for a in archs])
    np.testing.assert_array_equal(ofa_batch_encoding(sp, archs), ref)


def test_ofa_predictor_gives_imagenet_like_fractions_and_prefers_bigger_nets():
    sp = get_space("ofa-mbv3-w1.2")
    src = open_accuracy_source(f"ofa-predictor:{PREDICTOR}", sp)
    acc = src.evaluate([sp.smallest(), sp.largest()] + sample_many(sp, 30, seed=0))
    assert np.all((acc > 0.6) & (acc < 0.9))
    assert acc[1] > acc[0] + 0.03
    prov = src.provenance()
    assert prov["sha256"].startswith("48685122a354") and prov["layers"][0] == [400, 128]
    assert src.queries == 32
