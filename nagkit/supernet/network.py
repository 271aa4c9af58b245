"""The elastic OFA MobileNetV3 supernet.

Verbs: :meth:`OFAMobileNetV3.set_active` (take an ``Arch``), :meth:`extract` (a static
``StaticNet`` with copied weights), :meth:`sample_active` (seeded), :meth:`sort_channels`
(elastic expand). State_dict keys equal OFA's ``OFAMobileNetV3`` exactly.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from nagkit.space import Arch, SearchSpace, get_space
from nagkit.space.sampling import sample
from nagkit.supernet.elastic import DynamicMBConvLayer
from nagkit.supernet.layers import ConvLayer, IdentityLayer, LinearLayer, MBConvLayer, ResidualBlock, global_avg_pool
from nagkit.supernet.static import StaticNet


class OFAMobileNetV3(nn.Module):
    def __init__(self, space: SearchSpace | str):
        super().__init__()
        space = get_space(space)
        self.space = space
        bn = (space.bn_momentum, space.bn_eps)
        self._bn = bn
        stem, first = space.stem_width, space.first_block_width
        self.first_conv = ConvLayer(space.in_channels, stem, 3, space.stem_stride, act_func=space.stem_act,
                                    bn_momentum=bn[0], bn_eps=bn[1])
        first_block = MBConvLayer(stem, first, 3, 1, 1, act_func=space.first_block_act, use_se=space.first_block_se,
                                  bn_momentum=bn[0], bn_eps=bn[1])
        blocks: list[nn.Module] = [ResidualBlock(first_block, IdentityLayer(first) if stem == first else None)]
        self.block_group_info: list[list[int]] = []
        c = first
        idx = 1
        for si in range(space.n_stages):
            cout = space.stage_widths[si]
            group = []
            for bi in range(space.max_depth):
                s = space.stage_strides[si] if bi == 0 else 1
                layer = DynamicMBConvLayer(c, cout, space.ks_list, space.expand_list, s, space.stage_acts[si],
                                           space.stage_se[si], bn[0], bn[1])
                blocks.append(ResidualBlock(layer, IdentityLayer(c) if (s == 1 and c == cout) else None))
                group.append(idx)
                idx += 1
                c = cout
            self.block_group_info.append(group)
        self.blocks = nn.ModuleList(blocks)
        self.final_expand_layer = ConvLayer(c, space.final_expand_width, 1, 1, act_func="h_swish",
                                            bn_momentum=bn[0], bn_eps=bn[1])
        self.feature_mix_layer = ConvLayer(space.final_expand_width, space.last_channel, 1, 1, use_bn=False,
                                           act_func="h_swish")
        self.classifier = LinearLayer(space.last_channel, space.n_classes, dropout_rate=space.dropout)
        self.active_depths = [space.max_depth] * space.n_stages
        self.active_r = max(space.resolutions)

    # -- elastic state -----------------------------------------------------------------------
    def set_active(self, arch: Arch) -> OFAMobileNetV3:
        """Activate ``arch`` (validated against the space). Returns self."""
        self.space.validate(arch)
        for si, st in enumerate(arch.stages):
            group = self.block_group_info[si]
            for bi, (k, e) in enumerate(st):
                self.blocks[group[bi]].conv.set_active(k, e)
            self.active_depths[si] = len(st)
        self.active_r = arch.r
        return self

    def set_fixed_shape(self, on: bool = True) -> OFAMobileNetV3:
        """Run elastic blocks at their largest shapes with masks (same results; see
        :meth:`DynamicMBConvLayer._forward_fixed`). Returns self."""
        for b in self.blocks[1:]:
            b.conv.fixed_shape = bool(on)
        return self

    def set_max(self) -> OFAMobileNetV3:
        return self.set_active(self.space.largest())

    @property
    def active_arch(self) -> Arch:
        stages = []
        for si, group in enumerate(self.block_group_info):
            stages.append(tuple((self.blocks[i].conv.active_kernel, self.blocks[i].conv.active_expand)
                                for i in group[: self.active_depths[si]]))
        return Arch(self.active_r, tuple(stages))

    def sample_active(self, rng: np.random.Generator) -> Arch:
        """Activate a uniformly random arch drawn with ``rng``; returns it."""
        arch = sample(self.space, rng)
        self.set_active(arch)
        return arch

    # -- forward -----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first_conv(x)
        x = self.blocks[0](x)
        for si, group in enumerate(self.block_group_info):
            for i in group[: self.active_depths[si]]:
                x = self.blocks[i](x)
        x = self.final_expand_layer(x)
        x = global_avg_pool(x)
        x = self.feature_mix_layer(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)

    # -- extraction --------------------------------------------------------------------------
    @torch.no_grad()
    def extract(self, arch: Arch | None = None) -> StaticNet:
        """A static subnet with copies of the weights of ``arch`` (default: the active one)."""
        if arch is not None:
            self.set_active(arch)
        arch = self.active_arch
        blocks: list[nn.Module] = [_clone(self.blocks[0])]
        for si, group in enumerate(self.block_group_info):
            for i in group[: self.active_depths[si]]:
                rb = self.blocks[i]
                sub = rb.conv.extract(self._bn)
                blocks.append(ResidualBlock(sub, IdentityLayer(rb.conv.cin) if rb.shortcut is not None else None))
        net = StaticNet(_clone(self.first_conv), blocks, _clone(self.final_expand_layer), _clone(self.feature_mix_layer),
                        _clone(self.classifier), meta={"space": self.space.name, "arch": str(arch), "resolution": arch.r})
        net._bn = self._bn
        return net.eval()

    @torch.no_grad()
    def sort_channels(self, expand_stage: int = 0) -> None:
        for b in self.blocks[1:]:
            b.conv.sort_channels(expand_stage)


def _clone(m: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(m)
