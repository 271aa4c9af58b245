"""Shared helpers of the supernet tests."""

from __future__ import annotations

import torch

from nagkit.supernet.network import OFAMobileNetV3


def random_supernet(space, seed: int = 0) -> OFAMobileNetV3:
    """A supernet with seeded weights and non-trivial BN statistics and SE biases, so masked,
    gated and sliced executions cannot agree by accident."""
    torch.manual_seed(seed)
    net = OFAMobileNetV3(space)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None:
                m.bias.uniform_(-0.5, 0.5)
    return net
