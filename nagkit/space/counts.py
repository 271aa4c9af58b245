"""Exact parameter and MAC counts from a layer list (no torch needed), and the peak
activation memory of the exported graph (:func:`layer_peak`; docs/decisions.md 39)."""

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


def explicit_pad(in_hw: int, k: int, stride: int) -> bool:
    """Whether the exported TFLite graph pads a ``k``x``k`` conv's input with a PAD operator:
    PyTorch pads ``k // 2`` on each side, which TFLite's SAME padding reproduces only when
    ``(in_hw - 1)`` is a multiple of the stride (always for stride 1, odd inputs for stride 2)."""
    return k > 1 and (in_hw - 1) % stride != 0


def layer_steps(l: LayerSpec) -> list[int]:
    """The activation elements live at each operator of one layer, run one operator at a time
    as nagkit's TFLite export writes it: ReLU fused into its conv, h-swish an operator of its
    own, a PAD operator before a strided conv whose padding SAME does not reproduce
    (:func:`explicit_pad`), SE as pool -> two 1x1 convs -> gate multiply, the residual input held
    until the add. Each operator holds its inputs and its output (weights are not activations)."""
    hw_in, hw_out = l.in_hw * l.in_hw, l.out_hw * l.out_hw
    x = l.cin * hw_in
    hswish = l.act == "h_swish"
    if l.kind in ("stem", "final_expand"):
        o = l.cout * hw_out
        steps = []
        if explicit_pad(l.in_hw, l.k, l.stride):
            padded = l.cin * (l.in_hw + 2 * (l.k // 2)) ** 2
            steps.append(x + padded)
            x = padded
        steps.append(x + o)
        return steps + ([2 * o] if hswish else [])
    if l.kind == "mbconv":
        keep = x if l.skip else 0  # the block's input, held for the residual add
        steps, h = [], x
        if l.expand != 1:
            a = l.mid * hw_in
            steps.append(x + a)
            if hswish:
                steps.append(keep + 2 * a)
            h = a
        if explicit_pad(l.in_hw, l.k, l.stride):
            padded = l.mid * (l.in_hw + 2 * (l.k // 2)) ** 2
            steps.append(keep + h + padded)
            h = padded
        b = l.mid * hw_out
        steps.append(keep + h + b)
        if hswish:
            steps.append(keep + 2 * b)
        if l.se:  # mean over H, over W, two 1x1 convs, the gate scaled, then b * gate
            steps += [keep + b + l.mid * l.out_hw, keep + b + l.mid + b]
        y = l.cout * hw_out
        steps.append(keep + b + y)
        if l.skip:
            steps.append(x + 2 * y)
        return steps
    if l.kind == "pool":  # a mean over H, then over W
        return [x + l.cin * l.in_hw, l.cin * l.in_hw + l.cout]
    if l.kind == "feature_mix":
        return [l.cin + l.cout] + ([2 * l.cout] if hswish else [])
    if l.kind == "classifier":
        return [l.cin + l.cout]
    raise ValueError(f"unknown layer kind {l.kind!r}")


def layer_peak(l: LayerSpec) -> int:
    """The most activation elements one layer holds at once (:func:`layer_steps`)."""
    return max(layer_steps(l))


def input_peak(l: LayerSpec) -> int:
    """The first operator: the NCHW input laid out as NHWC (a reshape or transpose), both held."""
    return 2 * l.cin * l.in_hw * l.in_hw


def count_peak(layers: list[LayerSpec]) -> int:
    """Peak activation elements of a network: the largest of its layers' (and the input's)."""
    return max([input_peak(layers[0])] + [layer_peak(l) for l in layers])
