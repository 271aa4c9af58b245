"""`nagkit build --accuracy auto|always|never`: when the accuracy source is asked."""

from __future__ import annotations

import numpy as np
import pytest

from nagkit.build import _source_accuracy
from nagkit.errors import BadInputError


class CountingSource:
    """Test double of an accuracy source: counts queries, optionally expensive with a cache."""

    def __init__(self, expensive: bool, cache: dict | None = None):
        self.expensive, self.cache, self.queries = expensive, dict(cache or {}), 0

    def evaluate(self, archs):
        self.queries += len(archs)
        return np.full(len(archs), 0.5)

    def cached(self, arch):
        return self.cache.get(str(arch))


def test_cheap_source_is_always_asked_in_auto():
    src = CountingSource(expensive=False)
    assert _source_accuracy(src, "r28-a", "auto") == 0.5
    assert src.queries == 1


def test_expensive_source_uses_only_its_cache_in_auto():
    src = CountingSource(expensive=True, cache={"r28-a": 0.91})
    assert _source_accuracy(src, "r28-a", "auto") == 0.91
    assert _source_accuracy(src, "r28-b", "auto") is None
    assert src.queries == 0


def test_always_and_never():
    src = CountingSource(expensive=True)
    assert _source_accuracy(src, "r28-b", "always") == 0.5
    assert src.queries == 1
    assert _source_accuracy(src, "r28-b", "never") is None
    assert src.queries == 1


def test_bad_mode_is_refused(tmp_path):
    from nagkit.build import build

    with pytest.raises(BadInputError, match="--accuracy 'sometimes' is not valid; valid: auto, always, never"):
        build(1.0, accuracy="sometimes", out=tmp_path / "b")


def test_supernet_source_reports_expensive_and_cache(tmp_path):
    from nagkit.data.accuracy import CallableAccuracySource

    class Fn:
        def __call__(self, archs):
            return [0.7] * len(archs)

        def cached(self, arch):
            return 0.8 if str(arch) == "x" else None

    src = CallableAccuracySource(None, "supernet:x", Fn(), name="supernet", expensive=True)
    assert src.expensive and src.cached("x") == 0.8 and src.cached("y") is None
