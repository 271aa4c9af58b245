"""BatchNorm recalibration: re-estimate running statistics of a (sub)network on data.

Inherited supernet weights come with BN statistics of the *full* network; a subnet needs its
own. We reset the statistics and accumulate an exact cumulative average over ``n_batches``
batches (momentum ``None``), with everything else frozen.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


@torch.no_grad()
def recalibrate_bn(net: nn.Module, batches: Iterable, n_batches: int | None = None,
                   device: torch.device | str | None = None) -> nn.Module:
    """Recompute BN running statistics of ``net`` from ``batches`` ((x, y) pairs or tensors).

    The network is returned in eval mode. Raises ValueError if no batch was seen.
    """
    bns = [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [(m.momentum, m.training) for m in bns]
    was_training = net.training
    net.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    seen = 0
    try:
        for batch in batches:
            if n_batches is not None and seen >= n_batches:
                break
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            if device is not None:
                x = x.to(device, non_blocking=True)
            net(x)
            seen += 1
    finally:
        for m, (mom, _tr) in zip(bns, saved):
            m.momentum = mom
        net.train(was_training)
    if seen == 0:
        raise ValueError("BN recalibration saw no batches; pass a non-empty data loader")
    return net.eval()
