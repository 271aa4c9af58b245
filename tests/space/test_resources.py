"""Per-slot parameters, MACs and peak activation memory (nagkit.space.resources) against the
layer lists and against the real PyTorch subnet (its parameters, and MACs counted from its
modules while it runs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.space import get_space, sample_many
from nagkit.space.counts import count_peak, explicit_pad, layer_steps
from nagkit.space.decisions import from_archs
from nagkit.space.resources import SlotResources
from nagkit.supernet import OFAMobileNetV3

SPACES = ("fmnist-mbv3-w0.5", "ofa-mbv3-w1.0", "ofa-mbv3-w1.2")


def module_macs(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Multiply-accumulates of every Conv2d and Linear as it runs: output elements x the inputs
    each one reads (in_channels / groups x kernel area; in_features)."""
    total = 0

    def conv(m, inp, out):
        nonlocal total
        total += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear(m, inp, out):
        nonlocal total
        total += out.numel() * m.in_features

    hooks = [m.register_forward_hook(conv if isinstance(m, torch.nn.Conv2d) else linear)
             for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return total


def archs_of(sp, n, seed):
    """``n`` random archs spread over the space's resolutions, plus its smallest and largest."""
    archs = sample_many(sp, n, seed=seed)
    rs = sp.resolutions
    return archs + [sp.smallest(rs[len(rs) // 2]), sp.largest(rs[0]), sp.smallest(), sp.largest()]


@pytest.mark.parametrize("space_name", SPACES)
def test_slot_sums_equal_the_layer_counts(space_name):
    sp = get_space(space_name)
    res = SlotResources(sp)
    archs = archs_of(sp, 200, seed=5)
    got = res(from_archs(sp, archs))
    assert got["params"].tolist() == [sp.params(a) for a in archs]
    assert got["macs"].tolist() == [sp.macs(a) for a in archs]
    assert got["peak"].tolist() == [sp.peak_activation(a) for a in archs]
    assert len({(a.r) for a in archs}) > 1


@pytest.mark.parametrize("space_name", ["fmnist-mbv3-w0.5", "ofa-mbv3-w1.0"])
def test_counts_equal_the_pytorch_subnet(space_name):
    sp = get_space(space_name)
    net = OFAMobileNetV3(sp).eval()
    res = SlotResources(sp)
    archs = archs_of(sp, 3, seed=13)
    got = res(from_archs(sp, archs))
    for i, arch in enumerate(archs):
        sub = net.extract(arch).eval()
        assert got["params"][i] == sum(p.numel() for p in sub.parameters()), arch
        assert got["macs"][i] == module_macs(sub, torch.zeros(1, sp.in_channels, arch.r, arch.r)), arch


def test_peak_is_the_largest_layer_and_counts_the_residual_input():
    sp = get_space("fmnist-mbv3-w0.5")
    arch = sp.parse_arch("r36-k5e6.k7e6.k5e4-k7e6.k7e6.k5e3-k5e3.k5e6.k7e4-k7e4.k7e4-k7e3.k5e3.k3e4.k5e4")
    layers = sp.layers(arch)
    # stage 1's first block: 16 -> 48 channels at 36x36, padded to 40x40 for its 5x5 stride-2 conv
    b = layers[2]
    assert (b.cin, b.mid, b.in_hw, b.k, b.stride, b.skip) == (8, 48, 36, 5, 2, False)
    assert explicit_pad(36, 5, 2) and not explicit_pad(9, 5, 2) and not explicit_pad(36, 7, 1)
    assert max(layer_steps(b)) == 48 * 36 * 36 + 48 * 40 * 40
    # a residual block holds its input until the add: x + y + (x + y)
    first = layers[1]
    assert first.skip and layer_steps(first)[-1] == 3 * 8 * 36 * 36
    assert count_peak(layers) == 48 * 36 * 36 + 48 * 40 * 40
    # bigger expand ratios never lower the peak; the kernel changes it only through the padding
    small = sp.parse_arch("r36-k5e3.k7e6.k5e4-k7e6.k7e6.k5e3-k5e3.k5e6.k7e4-k7e4.k7e4-k7e3.k5e3.k3e4.k5e4")
    assert sp.peak_activation(small) < sp.peak_activation(arch)


@pytest.mark.parametrize("space_name", SPACES)
def test_resources_grow_with_kernel_expand_and_resolution(space_name):
    """The cheapest block of every slot is the smallest kernel and expand ratio for parameters
    and MACs, and the smallest expand ratio for the peak: what makes the constrained decoder's
    cheapest completions agree across resources (docs/decisions.md 39)."""
    res = SlotResources(get_space(space_name))
    for name in ("params", "macs"):
        s = res.slots[name]
        assert (np.diff(s, axis=2) > 0).all() and (np.diff(s, axis=3) > 0).all(), name
    assert (np.diff(res.slots["peak"], axis=3) >= 0).all()
    assert (np.diff(res.fixed["macs"]) > 0).all() and (np.diff(res.fixed["peak"]) > 0).all()
    assert (res.fixed["params"] == res.fixed["params"][0]).all()


@pytest.mark.slow
def test_peak_equals_the_exported_tflite_graphs_liveness(tmp_path):
    """The estimate is the live-tensor peak of the file LiteRT runs, exactly; LiteRT's own arena
    places those tensors with alignment and gaps (0.9-12.2% more on 28 networks: benchmarks/constraints)."""
    from nagkit.runtimes.convert import to_tflite
    from nagkit.runtimes.memory import tflite_activation_memory

    sp = get_space("fmnist-mbv3-w0.5")
    net = OFAMobileNetV3(sp).eval()
    # one network here; the build test (tests/build/test_build_limits.py) checks its own export the same way
    for i, arch in enumerate([sp.parse_arch("r40-k7e6.k5e3.k3e4-k3e3.k5e6.k7e3-k5e4.k5e4-k3e3.k7e6.k5e3-k3e6.k3e3")]):
        path = to_tflite(net.extract(arch).eval(), torch.zeros(1, 1, arch.r, arch.r), tmp_path / f"m{i}.tflite")
        mem = tflite_activation_memory(path)
        assert mem["liveness_bytes"] == 4 * sp.peak_activation(arch), arch
        assert mem["liveness_bytes"] <= mem["arena_bytes"] <= 1.15 * mem["liveness_bytes"]
