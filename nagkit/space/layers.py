"""One layer of a concrete network (:class:`LayerSpec`) and the channel/shape arithmetic.

Shared by the space (which lists an arch's layers), the exact counts, the supernet's per-layer
builders and the latency tables' block keys; it imports nothing else of nagkit.
"""

from __future__ import annotations

from dataclasses import dataclass


def make_divisible(v: float, divisor: int = 8, min_val: int | None = None) -> int:
    """OFA's (and TF's) channel rounding: nearest multiple of ``divisor``, never < 90% of v."""
    if min_val is None:
        min_val = divisor
    new_v = max(min_val, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return int(new_v)


def conv_out(size: int, stride: int) -> int:
    """Spatial size after a 'same'-padded conv (odd kernel): ``(f - 1) // s + 1``."""
    return (size - 1) // stride + 1


@dataclass(frozen=True)
class LayerSpec:
    """One layer of a concrete (static) network, as latency tables and counters see it.

    ``kind`` is one of ``stem``, ``mbconv`` (the fixed first block too, with ``expand=1``),
    ``final_expand``, ``pool``, ``feature_mix``, ``classifier``.
    """

    kind: str
    in_hw: int
    out_hw: int
    cin: int
    cout: int
    k: int = 1
    stride: int = 1
    mid: int = 0
    expand: float = 0
    se: bool = False
    se_mid: int = 0
    act: str = ""
    skip: bool = False
    bn: bool = True
    bias: bool = False


def layer_input_shape(spec: LayerSpec, batch: int = 1) -> tuple[int, int, int, int]:
    """NCHW input of the layer run on its own (the classifier and feature mix take
    ``[batch, C, 1, 1]`` too)."""
    return (batch, spec.cin, spec.in_hw, spec.in_hw)
