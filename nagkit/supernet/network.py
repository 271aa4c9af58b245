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
        # Tensor control (set_tensor_control): the active arch as a device vector; None when off.
        self._ctl: torch.Tensor | None = None
        self._gates: list[torch.Tensor] = []

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
        if self._ctl is not None:
            self._write_control(self.control_vector())
        return self

    def set_fixed_shape(self, on: bool = True) -> OFAMobileNetV3:
        """Run elastic blocks at their largest shapes with masks (same results; see
        :meth:`DynamicMBConvLayer._forward_fixed`). Returns self."""
        for b in self.blocks[1:]:
            b.conv.fixed_shape = bool(on)
        return self

    # -- tensor control (CUDA graphs) ----------------------------------------------------------
    def control_layout(self) -> list[tuple[int, int, int]]:
        """(mid, se, kernel) segment lengths of every elastic block, in block order; the vector
        ends with one depth gate per elastic block."""
        return [b.conv.control_sizes() for b in self.blocks[1:]]

    def control_length(self) -> int:
        return sum(sum(s) for s in self.control_layout()) + len(self.blocks) - 1

    def control_vector(self, arch: Arch | None = None) -> np.ndarray:
        """The control vector (float32) of ``arch`` (validated; default: the active arch):
        per elastic block its middle-channel mask, SE mask and kernel one-hot, then the depth
        gates (1 for the blocks within each stage's depth)."""
        if arch is None:
            arch = self.active_arch
        else:
            self.space.validate(arch)
        v = np.zeros(self.control_length(), dtype=np.float32)
        off = 0
        segs = []
        for b, sizes in zip(self.blocks[1:], self.control_layout()):
            segs.append((b.conv, off, off + sum(sizes)))
            off += sum(sizes)
        for si, st in enumerate(arch.stages):
            for bi, (k, e) in enumerate(st):
                i = self.block_group_info[si][bi]
                conv, a, z = segs[i - 1]
                conv.control_values(v[a:z], k, e)
                v[off + i - 1] = 1
        for si, group in enumerate(self.block_group_info):  # blocks beyond the depth: any valid
            for i in group[len(arch.stages[si]):]:          # setting, gated out
                conv, a, z = segs[i - 1]
                conv.control_values(v[a:z], max(conv.ks_list), max(conv.expand_list))
        return v

    def set_tensor_control(self, on: bool = True) -> OFAMobileNetV3:
        """Read the active arch from a device tensor instead of Python ints (implies fixed-shape
        execution): every elastic block runs, blocks beyond a stage's depth are gated to zero
        (``x + gate * block(x)``), and the kernel and expand choices are masks (see
        ``DynamicMBConvLayer._forward_ctl``). The forward pass then has the same operations for
        every arch of a resolution, so it can be captured once as a CUDA graph and replayed
        after :meth:`set_active` (or :meth:`write_control`) changes the arch. Call after moving
        the network to its device. Returns self."""
        if not on:
            self._ctl, self._gates = None, []
            for b in self.blocks[1:]:
                b.conv.ctl = None
            return self
        lo = min(self.space.depth_list)
        for group in self.block_group_info:
            for i in group[lo:]:
                if self.blocks[i].shortcut is None:
                    raise ValueError(f"block {i} can be skipped but has no identity shortcut")
        dev = self.first_conv.conv.weight.device
        self._ctl = torch.zeros(self.control_length(), dtype=torch.float32, device=dev)
        off = 0
        for b, (n_mid, n_se, n_k) in zip(self.blocks[1:], self.control_layout()):
            c = self._ctl
            b.conv.ctl = {"mid": c[off:off + n_mid].view(1, n_mid, 1, 1),
                          "se": c[off + n_mid:off + n_mid + n_se].view(1, n_se, 1, 1),
                          "ks": c[off + n_mid + n_se:off + n_mid + n_se + n_k]}
            off += n_mid + n_se + n_k
        self._gates = [self._ctl[off + j:off + j + 1].view(1, 1, 1, 1) for j in range(len(self.blocks) - 1)]
        self.set_fixed_shape(True)
        self._write_control(self.control_vector())
        return self

    @property
    def control(self) -> torch.Tensor | None:
        """The device control vector (None unless :meth:`set_tensor_control` is on)."""
        return self._ctl

    def _write_control(self, v: np.ndarray) -> None:
        src = torch.from_numpy(v)
        if self._ctl.is_cuda:
            # pinned + non_blocking: no host sync; the caching host allocator keeps the pinned
            # block alive until the copy has run.
            self._ctl.copy_(src.pin_memory(), non_blocking=True)
        else:
            self._ctl.copy_(src)

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
        if self._ctl is not None:
            lo = min(self.space.depth_list)
            for group in self.block_group_info:
                for j, i in enumerate(group):
                    b = self.blocks[i]
                    x = b(x) if j < lo else x + self._gates[i - 1].to(x.dtype) * b.conv(x)
        else:
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
