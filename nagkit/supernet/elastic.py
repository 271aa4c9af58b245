"""Elastic (dynamic) layers of the OFA MobileNetV3 supernet.

Module and parameter names follow OFA exactly (``conv.conv.weight``, ``bn.bn.*``,
``conv.7to5_matrix``...), so OFA checkpoints load as they are. Unlike OFA, nothing is switched
by class-level globals and ``forward`` writes no state: the active kernel and expand ratio are
set explicitly by :meth:`DynamicMBConvLayer.set_active`.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from nagkit.space import make_divisible
from nagkit.supernet.layers import MBConvLayer, SEModule, build_activation, global_avg_pool


def sub_filter_start_end(kernel_size: int, sub_kernel_size: int) -> tuple[int, int]:
    center = kernel_size // 2
    dev = sub_kernel_size // 2
    return center - dev, center + dev + 1


class DynamicSeparableConv2d(nn.Module):
    """Depthwise conv with elastic kernel: smaller kernels are the centre of the largest one,
    passed through learned kernel transformation matrices (``7to5_matrix``, ``5to3_matrix``)."""

    def __init__(self, max_channels: int, ks_list: tuple[int, ...], stride: int = 1):
        super().__init__()
        self.max_channels = max_channels
        self.ks_list = tuple(sorted(set(ks_list)))
        self.stride = stride
        k = max(self.ks_list)
        self.conv = nn.Conv2d(max_channels, max_channels, k, stride, groups=max_channels, bias=False)
        for i in range(len(self.ks_list) - 1):
            small, large = self.ks_list[i], self.ks_list[i + 1]
            self.register_parameter(f"{large}to{small}_matrix", nn.Parameter(torch.eye(small**2)))

    def active_filter(self, channels: int, kernel_size: int) -> torch.Tensor:
        max_k = max(self.ks_list)
        start, end = sub_filter_start_end(max_k, kernel_size)
        filters = self.conv.weight[:channels, :channels, start:end, start:end]
        if kernel_size < max_k:
            f = self.conv.weight[:channels, :channels, :, :]
            for i in range(len(self.ks_list) - 1, 0, -1):
                src = self.ks_list[i]
                if src <= kernel_size:
                    break
                tgt = self.ks_list[i - 1]
                s, e = sub_filter_start_end(src, tgt)
                sub = f[:, :, s:e, s:e].contiguous()
                sub = sub.view(sub.size(0), sub.size(1), -1)
                sub = sub.view(-1, sub.size(2))
                sub = F.linear(sub, getattr(self, f"{src}to{tgt}_matrix"))
                sub = sub.view(filters.size(0), filters.size(1), tgt**2)
                f = sub.view(filters.size(0), filters.size(1), tgt, tgt)
            filters = f
        return filters

    def forward(self, x: torch.Tensor, kernel_size: int) -> torch.Tensor:
        c = x.size(1)
        w = self.active_filter(c, kernel_size).contiguous()
        return F.conv2d(x, w, None, self.stride, kernel_size // 2, 1, c)


class DynamicConv2d(nn.Module):
    """1x1 conv whose active input/output channels are the leading slice of the full weight."""

    def __init__(self, max_in: int, max_out: int):
        super().__init__()
        self.conv = nn.Conv2d(max_in, max_out, 1, 1, 0, bias=False)

    def active_filter(self, out_channels: int, in_channels: int) -> torch.Tensor:
        return self.conv.weight[:out_channels, :in_channels, :, :]

    def forward(self, x: torch.Tensor, out_channels: int) -> torch.Tensor:
        return F.conv2d(x, self.active_filter(out_channels, x.size(1)).contiguous(), None, 1, 0)


class DynamicBatchNorm2d(nn.Module):
    """BatchNorm over the leading ``C`` channels of the input; statistics are sliced views,
    so training updates the full running buffers in place (as in OFA)."""

    def __init__(self, max_features: int, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.bn = nn.BatchNorm2d(max_features, momentum=momentum, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.size(1)
        bn = self.bn
        if bn.num_features == c:
            return bn(x)
        momentum = bn.momentum
        if self.training and bn.track_running_stats:
            bn.num_batches_tracked += 1
            if bn.momentum is None:
                momentum = 1.0 / float(bn.num_batches_tracked)
        return F.batch_norm(x, bn.running_mean[:c], bn.running_var[:c], bn.weight[:c], bn.bias[:c],
                            self.training or not bn.track_running_stats, momentum or 0.0, bn.eps)


class DynamicSE(SEModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.size(1)
        mid = make_divisible(c // self.REDUCTION, 8)
        y = global_avg_pool(x)
        red, exp = self.fc.reduce, self.fc.expand
        y = F.conv2d(y, red.weight[:mid, :c, :, :], red.bias[:mid], 1, 0)
        y = self.fc.relu(y)
        y = F.conv2d(y, exp.weight[:c, :mid, :, :], exp.bias[:c], 1, 0)
        y = self.fc.h_sigmoid(y)
        return x * y


class DynamicMBConvLayer(nn.Module):
    """Elastic inverted residual block (kernel, expand ratio)."""

    def __init__(self, cin: int, cout: int, ks_list: tuple[int, ...], expand_list: tuple[int, ...], stride: int,
                 act_func: str, use_se: bool, bn_momentum: float = 0.1, bn_eps: float = 1e-5):
        super().__init__()
        self.cin, self.cout, self.stride, self.act_func, self.use_se = cin, cout, stride, act_func, use_se
        self.ks_list = tuple(sorted(set(ks_list)))
        self.expand_list = tuple(sorted(set(expand_list)))
        max_mid = make_divisible(round(cin * max(self.expand_list)), 8)
        self.max_mid = max_mid
        self.inverted_bottleneck = nn.Sequential(OrderedDict([
            ("conv", DynamicConv2d(cin, max_mid)),
            ("bn", DynamicBatchNorm2d(max_mid, bn_momentum, bn_eps)),
            ("act", build_activation(act_func)),
        ]))
        self.depth_conv = nn.Sequential(OrderedDict([
            ("conv", DynamicSeparableConv2d(max_mid, self.ks_list, stride)),
            ("bn", DynamicBatchNorm2d(max_mid, bn_momentum, bn_eps)),
            ("act", build_activation(act_func)),
        ]))
        if use_se:
            self.depth_conv.add_module("se", DynamicSE(max_mid, make_divisible(max_mid // SEModule.REDUCTION, 8)))
        self.point_linear = nn.Sequential(OrderedDict([
            ("conv", DynamicConv2d(max_mid, cout)),
            ("bn", DynamicBatchNorm2d(cout, bn_momentum, bn_eps)),
        ]))
        self.active_kernel = max(self.ks_list)
        self.active_expand = max(self.expand_list)
        # Fixed-shape execution (see :meth:`_forward_fixed`); set by OFAMobileNetV3.set_fixed_shape.
        self.fixed_shape = False
        # Tensor-controlled execution (see :meth:`_forward_ctl`): views into the supernet's control
        # vector, set by OFAMobileNetV3.set_tensor_control; None when off.
        self.ctl: dict[str, torch.Tensor] | None = None

    def set_active(self, kernel: int, expand: int) -> None:
        if kernel not in self.ks_list or expand not in self.expand_list:
            raise ValueError(f"kernel {kernel} / expand {expand} not in {self.ks_list} / {self.expand_list}")
        self.active_kernel, self.active_expand = kernel, expand

    def active_mid(self, cin: int | None = None) -> int:
        return make_divisible(round((cin or self.cin) * self.active_expand), 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ctl is not None:
            return self._forward_ctl(x)
        if self.fixed_shape:
            return self._forward_fixed(x)
        mid = self.active_mid(x.size(1))
        ib = self.inverted_bottleneck
        x = ib.act(ib.bn(ib.conv(x, mid)))
        dc = self.depth_conv
        x = dc.act(dc.bn(dc.conv(x, self.active_kernel)))
        if self.use_se:
            x = dc.se(x)
        pl = self.point_linear
        return pl.bn(pl.conv(x, self.cout))

    def _forward_fixed(self, x: torch.Tensor) -> torch.Tensor:
        """The active subnet computed at the *largest* shapes, with inactive channels zeroed.

        Every tensor has the shape of the largest block whatever kernel and expand ratio are
        active: the active kernel (transformed as in :meth:`forward`) is zero-padded to the
        largest size, and masks zero the middle channels beyond the active ones (after the
        expand BN/activation, after the depthwise BN/activation, and the SE bottleneck beyond
        its active width). The result, and the gradient of every weight, equals the sliced
        computation of :meth:`forward` up to float rounding; only the BN running statistics of
        inactive channels are also updated (they never reach an active output, and subnets get
        BN recalibration before any evaluation). On CUDA this keeps the number of distinct
        convolution shapes at one per resolution instead of one per (kernel, expand,
        resolution) of every block, so cuDNN's per-shape set-up (seconds per new subnet,
        docs/decisions.md 9) happens once.
        """
        mid = self.active_mid(x.size(1))
        k_max, k = max(self.ks_list), self.active_kernel
        w = self.depth_conv.conv.active_filter(self.max_mid, k)
        if k < k_max:
            p = (k_max - k) // 2
            w = F.pad(w, (p, p, p, p))
        se_mask = None
        if self.use_se:
            se_mid = make_divisible(mid // SEModule.REDUCTION, 8)
            se_mask = _channel_mask(self.depth_conv.se.fc.reduce.out_channels, se_mid, x)
        return self._forward_masked(x, _channel_mask(self.max_mid, mid, x), se_mask, w)

    def _forward_masked(self, x: torch.Tensor, mid_mask: torch.Tensor, se_mask: torch.Tensor | None,
                        w: torch.Tensor) -> torch.Tensor:
        """The block at its largest shapes with depthwise filter ``w`` (largest kernel size):
        ``mid_mask`` ``[1, max_mid, 1, 1]`` zeroes the inactive middle channels after the expand
        and after the depthwise BN/activation, ``se_mask`` the SE bottleneck's inactive ones."""
        ib, dc, pl = self.inverted_bottleneck, self.depth_conv, self.point_linear
        h = ib.act(ib.bn.bn(F.conv2d(x, ib.conv.conv.weight)))
        mask = mid_mask.to(h.dtype)
        h = h * mask
        h = F.conv2d(h, w.contiguous(), None, self.stride, max(self.ks_list) // 2, 1, self.max_mid)
        h = dc.act(dc.bn.bn(h)) * mask
        if self.use_se:
            red, exp = dc.se.fc.reduce, dc.se.fc.expand
            y = global_avg_pool(h)
            y = dc.se.fc.relu(F.conv2d(y, red.weight, red.bias)) * se_mask.to(y.dtype)
            y = dc.se.fc.h_sigmoid(F.conv2d(y, exp.weight, exp.bias))
            h = h * y
        return pl.bn.bn(F.conv2d(h, pl.conv.conv.weight))

    def control_sizes(self) -> tuple[int, int, int]:
        """Lengths of this block's control segments: middle-channel mask, SE mask, kernel one-hot."""
        se = self.depth_conv.se.fc.reduce.out_channels if self.use_se else 0
        return self.max_mid, se, len(self.ks_list)

    def control_values(self, out, kernel: int | None = None, expand: float | None = None) -> None:
        """Write the control segments for ``kernel``/``expand`` (default: the active ones) into
        ``out`` (a float array of length ``sum(control_sizes())``)."""
        k = self.active_kernel if kernel is None else kernel
        e = self.active_expand if expand is None else expand
        mid = make_divisible(round(self.cin * e), 8)
        n_mid, n_se, _ = self.control_sizes()
        out[:] = 0
        out[:mid] = 1
        if n_se:
            out[n_mid:n_mid + make_divisible(mid // SEModule.REDUCTION, 8)] = 1
        out[n_mid + n_se + self.ks_list.index(k)] = 1

    def all_filters(self) -> list[torch.Tensor]:
        """The depthwise filter of every kernel size in ``ks_list`` (ascending), each computed
        exactly as :meth:`DynamicSeparableConv2d.active_filter` does, zero-padded to the largest."""
        conv = self.depth_conv.conv
        ks = self.ks_list
        f = conv.conv.weight
        c = f.size(0)
        out = [f]
        for i in range(len(ks) - 1, 0, -1):
            src, tgt = ks[i], ks[i - 1]
            s, e = sub_filter_start_end(src, tgt)
            sub = f[:, :, s:e, s:e].contiguous().view(c, f.size(1), -1).view(-1, tgt**2)
            f = F.linear(sub, getattr(conv, f"{src}to{tgt}_matrix")).view(c, 1, tgt, tgt)
            p = (ks[-1] - tgt) // 2
            out.append(F.pad(f, (p, p, p, p)))
        return out[::-1]

    def _forward_ctl(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`_forward_fixed` with the active kernel and expand ratio read from device
        tensors instead of Python ints: the middle-channel and SE masks are control tensors, and
        the depthwise filter is ``sum_k onehot[k] * filter_k`` over every kernel size. Values
        equal :meth:`_forward_fixed` (the one-hot sum adds exact zeros); the weights of unused
        kernel transforms get zero gradients instead of none. Nothing here depends on the
        active arch on the host, so one CUDA graph serves every arch of a resolution
        (docs/decisions.md 13)."""
        ctl = self.ctl
        sel = ctl["ks"]
        filters = self.all_filters()
        w = filters[0] * sel[0]
        for i in range(1, len(filters)):
            w = w + filters[i] * sel[i]
        return self._forward_masked(x, ctl["mid"], ctl["se"] if self.use_se else None, w)

    # -- extraction --------------------------------------------------------------------------
    @torch.no_grad()
    def extract(self, bn: tuple[float, float] = (0.1, 1e-5)) -> MBConvLayer:
        """A static ``MBConvLayer`` with copies of the active weights."""
        mid = self.active_mid()
        sub = MBConvLayer(self.cin, self.cout, self.active_kernel, self.stride, self.active_expand,
                          mid_channels=mid, act_func=self.act_func, use_se=self.use_se, bn_momentum=bn[0], bn_eps=bn[1])
        sub = sub.to(self.point_linear.conv.conv.weight.device)
        sub.inverted_bottleneck.conv.weight.copy_(self.inverted_bottleneck.conv.active_filter(mid, self.cin))
        _copy_bn(sub.inverted_bottleneck.bn, self.inverted_bottleneck.bn.bn)
        sub.depth_conv.conv.weight.copy_(self.depth_conv.conv.active_filter(mid, self.active_kernel))
        _copy_bn(sub.depth_conv.bn, self.depth_conv.bn.bn)
        if self.use_se:
            se_mid = make_divisible(mid // SEModule.REDUCTION, 8)
            src, dst = self.depth_conv.se.fc, sub.depth_conv.se.fc
            dst.reduce.weight.copy_(src.reduce.weight[:se_mid, :mid, :, :])
            dst.reduce.bias.copy_(src.reduce.bias[:se_mid])
            dst.expand.weight.copy_(src.expand.weight[:mid, :se_mid, :, :])
            dst.expand.bias.copy_(src.expand.bias[:mid])
        sub.point_linear.conv.weight.copy_(self.point_linear.conv.active_filter(self.cout, mid))
        _copy_bn(sub.point_linear.bn, self.point_linear.bn.bn)
        return sub

    # -- elastic expand: channel importance sorting ------------------------------------------
    @torch.no_grad()
    def sort_channels(self, expand_stage: int = 0) -> None:
        """Reorder the middle channels by importance (L1 norm of the point-linear weights) so
        that smaller expand ratios keep the most important ones (OFA's
        ``re_organize_middle_weights``). ``expand_stage`` > 0 keeps channels already ranked by an
        earlier shrinking stage inside their group."""
        importance = torch.sum(torch.abs(self.point_linear.conv.conv.weight), dim=(0, 2, 3))
        if expand_stage > 0:
            targets = [make_divisible(round(self.cin * e), 8) for e in sorted(self.expand_list, reverse=True)]
            right = len(importance)
            base = -len(targets) * 1e5
            for i in range(expand_stage + 1):
                left = targets[i]
                importance[left:right] += base
                base += 1e5
                right = left
        _, idx = torch.sort(importance, dim=0, descending=True)
        pl = self.point_linear.conv.conv
        pl.weight.copy_(torch.index_select(pl.weight, 1, idx))
        _permute_bn(self.depth_conv.bn.bn, idx)
        dw = self.depth_conv.conv.conv
        dw.weight.copy_(torch.index_select(dw.weight, 0, idx))
        if self.use_se:
            exp, red = self.depth_conv.se.fc.expand, self.depth_conv.se.fc.reduce
            exp.weight.copy_(torch.index_select(exp.weight, 0, idx))
            exp.bias.copy_(torch.index_select(exp.bias, 0, idx))
            red.weight.copy_(torch.index_select(red.weight, 1, idx))
            se_imp = torch.sum(torch.abs(exp.weight), dim=(0, 2, 3))
            _, se_idx = torch.sort(se_imp, dim=0, descending=True)
            exp.weight.copy_(torch.index_select(exp.weight, 1, se_idx))
            red.weight.copy_(torch.index_select(red.weight, 0, se_idx))
            red.bias.copy_(torch.index_select(red.bias, 0, se_idx))
        _permute_bn(self.inverted_bottleneck.bn.bn, idx)
        ib = self.inverted_bottleneck.conv.conv
        ib.weight.copy_(torch.index_select(ib.weight, 0, idx))


def _channel_mask(total: int, active: int, like: torch.Tensor) -> torch.Tensor:
    """``[1, total, 1, 1]`` ones for the leading ``active`` channels, zeros after them."""
    m = torch.zeros(1, total, 1, 1, dtype=like.dtype, device=like.device)
    m[:, :active] = 1
    return m


def _copy_bn(dst: nn.BatchNorm2d, src: nn.BatchNorm2d) -> None:
    c = dst.num_features
    dst.weight.copy_(src.weight[:c])
    dst.bias.copy_(src.bias[:c])
    dst.running_mean.copy_(src.running_mean[:c])
    dst.running_var.copy_(src.running_var[:c])
    dst.num_batches_tracked.copy_(src.num_batches_tracked)


def _permute_bn(bn: nn.BatchNorm2d, idx: torch.Tensor) -> None:
    for t in (bn.weight, bn.bias, bn.running_mean, bn.running_var):
        t.copy_(torch.index_select(t, 0, idx))
