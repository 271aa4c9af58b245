"""Block keys: one readable, filename-safe string per distinct layer of a static network.

A key names everything that changes a layer's latency (in the spirit of OFA's table keys)::

    stem-in224x224x3-out112x112x16-k3-s2-hswish
    mbconv-in56x56x24-out28x28x40-mid96-k5-s2-se1-relu-skip0
    final_expand-in7x7x160-out7x7x960-k1-s1-hswish
    pool-in7x7x960-out1x1x960
    feature_mix-in1x1x960-out1x1x1280-hswish
    classifier-in1x1x1280-out1000

A table entry may be *scoped* to one input resolution as ``r224/<key>``. A scoped entry wins
over an unscoped one. Tables profiled by nagkit store unscoped keys (a layer's latency depends
only on its shapes, so one measurement serves every resolution); imported OFA tables keep OFA's
per-resolution values as scoped keys, so that predictions reproduce OFA's sums exactly.
"""

from __future__ import annotations

import re
from typing import Any

from nagkit.errors import BadInputError
from nagkit.space.space import LayerSpec

KINDS = ("stem", "mbconv", "final_expand", "pool", "feature_mix", "classifier")

_ACT_SHORT = {"h_swish": "hswish", "hswish": "hswish", "relu": "relu", "": "none", "none": "none"}
_ACT_LONG = {"hswish": "h_swish", "relu": "relu", "none": ""}

_SCOPE_RE = re.compile(r"^r(\d+)/(.+)$")
_SHAPE_RE = re.compile(r"^in(\d+)x(\d+)x(\d+)$")
_OUT_RE = re.compile(r"^out(?:(\d+)x(\d+)x)?(\d+)$")


def _act(a: str) -> str:
    if a in _ACT_SHORT:
        return _ACT_SHORT[a]
    if not re.fullmatch(r"[a-z0-9]+", a.replace("_", "")):
        raise BadInputError(f"activation {a!r} cannot appear in a block key; use letters and digits")
    return a.replace("_", "")


def block_key(layer: LayerSpec) -> str:
    """The key of one layer (see the module docstring for the format)."""
    io = f"in{layer.in_hw}x{layer.in_hw}x{layer.cin}-out{layer.out_hw}x{layer.out_hw}x{layer.cout}"
    if layer.kind in ("stem", "final_expand"):
        return f"{layer.kind}-{io}-k{layer.k}-s{layer.stride}-{_act(layer.act)}"
    if layer.kind == "mbconv":
        return (f"mbconv-{io}-mid{layer.mid}-k{layer.k}-s{layer.stride}-se{int(layer.se)}-"
                f"{_act(layer.act)}-skip{int(layer.skip)}")
    if layer.kind == "pool":
        return f"pool-{io}"
    if layer.kind == "feature_mix":
        return f"feature_mix-{io}-{_act(layer.act)}"
    if layer.kind == "classifier":
        return f"classifier-in{layer.in_hw}x{layer.in_hw}x{layer.cin}-out{layer.cout}"
    raise BadInputError(f"unknown layer kind {layer.kind!r}; valid kinds: {', '.join(KINDS)}")


def scoped(key: str, r: int) -> str:
    """The resolution-scoped form ``r<r>/<key>``."""
    return f"r{r}/{key}"


def split_scope(key: str) -> tuple[int | None, str]:
    """``("r224/mbconv-...")`` -> ``(224, "mbconv-...")``; unscoped keys give ``(None, key)``."""
    m = _SCOPE_RE.match(key)
    if m:
        return int(m.group(1)), m.group(2)
    return None, key


def parse_key(key: str) -> dict[str, Any]:
    """Decode a key into its fields (kind, in/out shape, mid, k, stride, se, act, skip).

    Raises :class:`BadInputError` naming the key when it is malformed."""
    r, body = split_scope(key)
    parts = body.split("-")
    bad = BadInputError(
        f"malformed block key {key!r}; expected e.g. "
        "'mbconv-in56x56x24-out28x28x40-mid96-k5-s2-se1-relu-skip0'"
    )
    if len(parts) < 3 or parts[0] not in KINDS:
        raise bad
    kind = parts[0]
    m_in, m_out = _SHAPE_RE.match(parts[1]), _OUT_RE.match(parts[2])
    if not m_in or not m_out:
        raise bad
    d: dict[str, Any] = {"kind": kind, "in_hw": int(m_in.group(1)), "cin": int(m_in.group(3)),
                         "out_hw": int(m_out.group(1) or 1), "cout": int(m_out.group(3))}
    if r is not None:
        d["resolution"] = r
    rest = parts[3:]
    try:
        if kind in ("stem", "final_expand"):
            k, s, act = rest
            d.update(k=int(k[1:]), stride=int(s[1:]), act=_ACT_LONG.get(act, act))
            assert k[0] == "k" and s[0] == "s"
        elif kind == "mbconv":
            mid, k, s, se, act, skip = rest
            assert mid.startswith("mid") and k[0] == "k" and s[0] == "s"
            assert se.startswith("se") and skip.startswith("skip")
            d.update(mid=int(mid[3:]), k=int(k[1:]), stride=int(s[1:]), se=bool(int(se[2:])),
                     act=_ACT_LONG.get(act, act), skip=bool(int(skip[4:])))
        elif kind == "feature_mix":
            (act,) = rest
            d["act"] = _ACT_LONG.get(act, act)
        elif rest:
            raise bad
    except (ValueError, AssertionError):
        raise bad from None
    return d


# -- calibration groups ------------------------------------------------------------------------
# A grouped calibration (see :mod:`nagkit.latency.calibration`) gives every block a multiplier
# shared by its group. A scheme names how a key maps to its group; it is stored in the table.
GROUP_SCHEMES = ("kind", "kind-in", "kind-in-k")


def block_group(key: str, scheme: str = "kind-in-k") -> str:
    """The calibration group of a block key under ``scheme``.

    ``kind``: the layer kind (``mbconv``, ``stem``, ...); ``kind-in``: kind and input feature-map
    size (``mbconv-in28``); ``kind-in-k``: also the kernel size where the layer has one
    (``mbconv-in28-k5``). A resolution scope is ignored: the same block at two resolutions is
    one group. A key that does not parse is its own group (``other``)."""
    if scheme not in GROUP_SCHEMES:
        raise BadInputError(f"unknown calibration group scheme {scheme!r}; valid: {', '.join(GROUP_SCHEMES)}")
    try:
        f = parse_key(key)
    except BadInputError:
        return "other"
    g = f["kind"]
    if scheme == "kind":
        return g
    g += f"-in{f['in_hw']}"
    if scheme == "kind-in-k" and "k" in f:
        g += f"-k{f['k']}"
    return g
