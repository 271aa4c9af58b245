"""Exact parameter and MAC counts from a layer list (no torch needed)."""

from __future__ import annotations

from collections.abc import Iterable

from nagkit.space.layers import LayerSpec


def layer_params(l: LayerSpec) -> int:
    if l.kind == "stem" or l.kind == "final_expand":
        return l.cin * l.cout * l.k * l.k + (2 * l.cout if l.bn else 0)
    if l.kind == "mbconv":
        p = 0
        if l.expand != 1:
            p += l.cin * l.mid + 2 * l.mid  # inverted bottleneck conv + BN
        p += l.mid * l.k * l.k + 2 * l.mid  # depthwise + BN
        if l.se:
            p += l.mid * l.se_mid + l.se_mid + l.se_mid * l.mid + l.mid
        p += l.mid * l.cout + 2 * l.cout  # point linear + BN
        return p
    if l.kind == "pool":
        return 0
    if l.kind == "feature_mix":
        return l.cin * l.cout
    if l.kind == "classifier":
        return l.cin * l.cout + l.cout
    raise ValueError(f"unknown layer kind {l.kind!r}")


def layer_macs(l: LayerSpec) -> int:
    hw = l.out_hw * l.out_hw
    if l.kind in ("stem", "final_expand"):
        return hw * l.cin * l.cout * l.k * l.k
    if l.kind == "mbconv":
        m = 0
        if l.expand != 1:
            m += l.in_hw * l.in_hw * l.cin * l.mid
        m += hw * l.mid * l.k * l.k
        if l.se:
            m += 2 * l.mid * l.se_mid
        m += hw * l.mid * l.cout
        return m
    if l.kind == "pool":
        return 0
    if l.kind in ("feature_mix", "classifier"):
        return l.cin * l.cout
    raise ValueError(f"unknown layer kind {l.kind!r}")


def count_params(layers: Iterable[LayerSpec]) -> int:
    return sum(layer_params(l) for l in layers)


def count_macs(layers: Iterable[LayerSpec]) -> int:
    return sum(layer_macs(l) for l in layers)
