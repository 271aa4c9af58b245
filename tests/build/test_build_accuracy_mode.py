"""`nagkit build --accuracy auto|always|never`: when the accuracy source is asked."""

from __future__ import annotations

import pytest
import torch

from nagkit.app.build import _source_accuracy
from nagkit.data.accuracy import AccuracySource, CallableAccuracySource
from nagkit.data.synthetic import tiny_space
from nagkit.errors import BadInputError

SP = tiny_space()
A, B = SP.smallest(), SP.largest()


def source(expensive: bool, cache: dict | None = None) -> CallableAccuracySource:
    """A real source around a constant callable; ``cache`` plays the callable's cache."""
    cache = {str(k): v for k, v in (cache or {}).items()}
    return CallableAccuracySource(SP, "test:", lambda archs: [0.5] * len(archs), name="test", expensive=expensive,
                                  cached=lambda arch: cache.get(str(arch)))


def test_cheap_source_is_always_asked_in_auto():
    src = source(expensive=False, cache={A: 0.9})
    assert _source_accuracy(src, A, "auto") == 0.5  # a cheap source is queried, its cache not consulted
    assert src.queries == 1


def test_expensive_source_uses_only_its_cache_in_auto():
    src = source(expensive=True, cache={A: 0.91})
    assert _source_accuracy(src, A, "auto") == 0.91
    assert _source_accuracy(src, B, "auto") is None
    assert src.queries == 0


def test_always_and_never():
    src = source(expensive=True)
    assert _source_accuracy(src, B, "always") == 0.5
    assert src.queries == 1
    assert _source_accuracy(src, B, "never") is None
    assert src.queries == 1


def test_bad_mode_is_refused(tmp_path):
    from nagkit.app.build import BuildOptions, build

    with pytest.raises(BadInputError, match="--accuracy 'sometimes' is not valid; valid: auto, always, never"):
        build(1.0, options=BuildOptions(accuracy="sometimes", out=tmp_path / "b"))


def test_supernet_source_is_expensive_and_answers_from_its_cache_file(tmp_path):
    """The real `supernet:` source: its cache file answers `cached`, nothing is evaluated."""
    from nagkit.data.accuracy import open_accuracy_source
    from nagkit.data.supernet_acc import SupernetEvaluator, append_results
    from nagkit.io import atomic_torch_save
    from nagkit.space import SearchSpace
    from nagkit.supernet import OFAMobileNetV3

    space = SearchSpace(name="tiny-fm", width_mult=0.25, base_stage_width=(16, 16, 24, 40, 80, 112, 160, 120, 160),
                        ks_list=(3, 5), expand_list=(2, 4), depth_list=(1, 2), resolutions=(28, 32), stem_stride=1,
                        in_channels=1, n_classes=10, dropout=0.0, mean=(0.5,), std=(0.5,))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = OFAMobileNetV3(space)
    ckpt = tmp_path / "supernet.pt"
    atomic_torch_save(ckpt, {"format": "nagkit-supernet/1", "space": space.to_dict(), "state_dict": net.state_dict(),
                             "train": "{}"})
    opts = {"cache": "acc.jsonl", "n_val": 12}
    key = SupernetEvaluator(ckpt, space, opts)._key_fields()
    small, large = space.smallest(), space.largest()
    append_results(tmp_path / "acc.jsonl", {str(small): 0.625}, key)

    src = open_accuracy_source(f"supernet:{ckpt}", space, options=opts)
    assert isinstance(src, AccuracySource) and src.expensive
    assert src.cached(small) == 0.625 and src.cached(large) is None
    assert _source_accuracy(src, small, "auto") == 0.625 and _source_accuracy(src, large, "auto") is None
    assert src.queries == 0  # nothing was evaluated (no images are needed)
