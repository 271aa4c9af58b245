"""Field-by-field checks of a search-space spec (``SearchSpace.to_dict()`` as read from a
file: a latency table's ``space.spec``, a workspace's inline ``[space]``), so that a bad value
fails where it is read, naming the field, instead of later as ``ZeroDivisionError`` or
``TypeError`` (issue 13 D4, D5). Bounds are generous but finite.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from nagkit.errors import short_repr
from nagkit.space.arch import MAX_VALUE

__all__ = ["SPACE_FIELDS", "spec_field_problem"]


def _real(v: Any) -> float | None:
    """``v`` as a finite float, or None (bools, strings, nan/inf, ints too large for a float)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


_ACT_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_LIST_MAX = 32


def _ints(lo: int, hi: int, *, odd: bool = False, max_len: int = _LIST_MAX) -> Callable[[Any], bool]:
    """A check: a non-empty list of at most ``max_len`` integers in ``lo..hi`` (odd ones)."""
    def ok(v: Any) -> bool:
        return (isinstance(v, list) and 0 < len(v) <= max_len
                and all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi and (not odd or x % 2)
                        for x in v))
    return ok


def _reals(lo: float, hi: float, *, lo_open: bool = False, max_len: int = _LIST_MAX) -> Callable[[Any], bool]:
    """A check: a non-empty list of finite numbers in [lo, hi] (or (lo, hi])."""
    def ok(v: Any) -> bool:
        return (isinstance(v, list) and 0 < len(v) <= max_len
                and all((f := _real(x)) is not None and (lo < f if lo_open else lo <= f) and f <= hi for x in v))
    return ok


def _one(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """The list check ``check`` applied to a single value."""
    return lambda v: check([v])


def _is_act(v: Any) -> bool:
    return isinstance(v, str) and (v == "" or _ACT_RE.fullmatch(v) is not None)


def _acts(v: Any) -> bool:
    return isinstance(v, list) and 0 < len(v) <= _LIST_MAX and all(_is_act(a) for a in v)


def _bools(v: Any) -> bool:
    return isinstance(v, list) and 0 < len(v) <= _LIST_MAX and all(isinstance(b, bool) for b in v)


def _text(max_len: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) and len(v) <= max_len


def _labels(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= 10_000_000 and all(isinstance(x, str) and len(x) <= 1000 for x in v)


#: Each field of SearchSpace.to_dict(): (check, what a valid value is). Bounds are generous
#: but finite, so that a hostile spec cannot make prediction loops or messages unbounded.
SPACE_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (lambda v: _text(200)(v) and v != "", "a non-empty string"),
    "width_mult": (_one(_reals(0.0, 100.0, lo_open=True)), "a number in (0, 100]"),
    "base_stage_width": (_ints(1, 100_000), "a list of integers in 1..100000"),
    "ks_list": (_ints(1, 99, odd=True), "a list of odd integers in 1..99"),
    "expand_list": (_ints(1, 1000), "a list of integers in 1..1000"),
    "depth_list": (_ints(1, 64), "a list of integers in 1..64"),
    "resolutions": (_ints(1, MAX_VALUE - 1, max_len=1024), f"a list of at most 1024 integers in 1..{MAX_VALUE - 1}"),
    "stage_strides": (_ints(1, 64), "a list of integers in 1..64"),
    "stage_acts": (_acts, "a list of activation names such as 'relu' or 'h_swish'"),
    "stage_se": (_bools, "a list of true/false"),
    "first_block_act": (_is_act, "an activation name such as 'relu'"),
    "first_block_se": (lambda v: isinstance(v, bool), "true or false"),
    "stem_stride": (_one(_ints(1, 64)), "an integer in 1..64"),
    "stem_act": (_is_act, "an activation name such as 'h_swish'"),
    "in_channels": (_one(_ints(1, 4096)), "an integer in 1..4096"),
    "n_classes": (_one(_ints(1, 10_000_000)), "an integer in 1..10000000"),
    "dropout": (_one(_reals(0.0, 1.0)), "a number in [0, 1]"),
    "bn_momentum": (_one(_reals(0.0, 1.0)), "a number in [0, 1]"),
    "bn_eps": (_one(_reals(0.0, 1.0, lo_open=True)), "a number in (0, 1]"),
    "description": (_text(10_000), "a string"),
    "mean": (_reals(-1e6, 1e6, max_len=4096), "a list of numbers"),
    "std": (_reals(0.0, 1e6, max_len=4096, lo_open=True), "a list of numbers > 0"),
    "labels": (_labels, "a list of strings"),
}


def spec_field_problem(spec: Mapping[str, Any]) -> str | None:
    """``"field 'x' is ...; it must be ..."`` for the first invalid known field, else None.
    Unknown fields are left to the caller (each names its own valid keys)."""
    for name, (check, valid) in SPACE_FIELDS.items():
        if name in spec and not check(spec[name]):
            return f"field {name!r} is {short_repr(spec[name])}; it must be {valid}"
    return None
