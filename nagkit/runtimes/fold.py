"""BatchNorm folded into the convolution before it, in PyTorch (decisions 34).

The TFLite converter folds every eval-mode BatchNorm that follows a convolution into that
convolution's weights and bias. :func:`fold_batchnorms` does the same fold on a copy of the
module, following the data flow (``torch.fx``): a BatchNorm is folded only where it is the one
user of a convolution's output. Converting the folded copy gives the same operators, options,
shapes and types as converting the module, and the same constant bytes where the BatchNorms
carry statistics (trained, or random in the tests); untrained ones (mean 0, var 1, weight 1,
bias 0), which the converter folds in a simplified way, leave a few weights one unit in the last
place apart (tested). It takes about a third less time, because the converter's decompositions
and lowering no longer see the BatchNorm nodes.
:func:`nagkit.export.parity.float16_reference` uses the same fold.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


class NotFoldableError(Exception):
    """torch.fx could not trace the module, so nothing was folded."""


def has_batchnorm(module: Any) -> bool:
    from torch.nn.modules.batchnorm import _BatchNorm

    return any(isinstance(m, _BatchNorm) for m in module.modules())


def fold_batchnorms(module: Any) -> Any:
    """A copy of ``module`` (eval mode) in which each convolution -> BatchNorm pair is one
    convolution with the folded weights; ``module`` itself is unchanged. A BatchNorm is folded
    only where it is the sole user of a convolution's output (the data flow, traced by
    ``torch.fx``); others stay (:func:`has_batchnorm` tells). The arithmetic is the converter's
    (:func:`_folded_conv`), so the constants come out as it would write them (see above). Raises
    :class:`NotFoldableError` if ``torch.fx`` cannot trace the module (control flow on a
    tensor's value in a ``forward``)."""
    import copy

    import torch
    from torch import fx

    try:
        traced = fx.symbolic_trace(copy.deepcopy(module).eval())
    except Exception as e:  # torch.fx raises many kinds on an untraceable forward
        raise NotFoldableError(f"{type(module).__name__}: {type(e).__name__}: {e}") from e
    mods = dict(traced.named_modules())
    for node in list(traced.graph.nodes):
        src = node.args[0] if node.op == "call_module" and node.args else None
        if not (isinstance(src, fx.Node) and src.op == "call_module" and len(src.users) == 1
                and isinstance(mods.get(node.target), torch.nn.BatchNorm2d)
                and type(mods.get(src.target)) is torch.nn.Conv2d):
            continue
        bn = mods[node.target]
        if not bn.track_running_stats or bn.running_var is None:
            continue
        _set_module(traced, src.target, _folded_conv(mods[src.target], bn))
        node.replace_all_uses_with(src)
        traced.graph.erase_node(node)
    traced.graph.lint()
    traced.delete_all_unused_submodules()
    traced.recompile()
    return traced


def _folded_conv(conv: Any, bn: Any) -> Any:
    """``conv`` followed by ``bn`` as one convolution, computed in the order the converter folds
    the decomposed BatchNorm (``(x - mean) * rsqrt(var + eps) * weight + bias``, one constant at
    a time): ``(W * rsqrt(var + eps)) * weight`` and ``((b - mean) * rsqrt(var + eps)) * weight +
    bias``. (``torch.nn.utils.fusion`` multiplies the two factors first, which rounds some
    weights one unit in the last place differently.)"""
    import copy

    import torch

    with torch.no_grad():
        inv = torch.rsqrt(bn.running_var + bn.eps)
        gamma = bn.weight if bn.affine else torch.ones_like(inv)
        beta = bn.bias if bn.affine else torch.zeros_like(inv)
        b = conv.bias if conv.bias is not None else torch.zeros_like(inv)
        shape = (-1,) + (1,) * (conv.weight.dim() - 1)
        fused = copy.deepcopy(conv)
        fused.weight = torch.nn.Parameter((conv.weight * inv.reshape(shape)) * gamma.reshape(shape))
        fused.bias = torch.nn.Parameter(((b - bn.running_mean) * inv) * gamma + beta)
    return fused


def _set_module(root: Any, target: str, new: Any) -> None:
    parent, _, name = target.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, new)


def folded_for_conversion(module: Any) -> Any:
    """What the converters are given: :func:`fold_batchnorms` of ``module`` when it has a
    BatchNorm, else ``module``. A module torch.fx cannot trace is converted as it is (the same
    model, converted more slowly), and the log says so."""
    if not has_batchnorm(module):
        return module
    try:
        return fold_batchnorms(module)
    except NotFoldableError as e:
        log.info("converting without folding BatchNorm first (the same model, more slowly): %s", e)
        return module
