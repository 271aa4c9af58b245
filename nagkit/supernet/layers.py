"""Static layers with OFA's module names, so state_dict keys match OFA's exactly.

Each layer has a ``config`` (OFA's dict format) and a ``build_from_config`` counterpart in
:mod:`nagkit.supernet.static`, so a subnet round-trips through JSON.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn


class Hswish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * F.relu6(x + 3.0) / 6.0


class Hsigmoid(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu6(x + 3.0) / 6.0


def build_activation(name: str | None) -> nn.Module | None:
    if name in (None, "", "none"):
        return None
    if name == "relu":
        return nn.ReLU()
    if name == "relu6":
        return nn.ReLU6()
    if name == "h_swish":
        return Hswish()
    if name == "h_sigmoid":
        return Hsigmoid()
    raise ValueError(f"unknown activation {name!r}; valid: relu, relu6, h_swish, h_sigmoid")


def global_avg_pool(x: torch.Tensor) -> torch.Tensor:
    """OFA pools with two keep-dim means (H then W), kept here for bit-level parity."""
    return x.mean(3, keepdim=True).mean(2, keepdim=True)


class SEModule(nn.Module):
    REDUCTION = 4

    def __init__(self, channel: int, mid: int):
        super().__init__()
        self.channel = channel
        self.fc = nn.Sequential(OrderedDict([
            ("reduce", nn.Conv2d(channel, mid, 1, 1, 0, bias=True)),
            ("relu", nn.ReLU()),
            ("expand", nn.Conv2d(mid, channel, 1, 1, 0, bias=True)),
            ("h_sigmoid", Hsigmoid()),
        ]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.fc(global_avg_pool(x))


class ConvLayer(nn.Module):
    """conv -> [bn] -> [act] (OFA's ``ConvLayer`` with ops_order weight_bn_act)."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, stride: int = 1, use_bn: bool = True,
                 act_func: str | None = "relu", bias: bool = False, bn_momentum: float = 0.1, bn_eps: float = 1e-5):
        super().__init__()
        self.cin, self.cout, self.kernel_size, self.stride = cin, cout, kernel_size, stride
        self.use_bn, self.act_func, self.bias = use_bn, act_func, bias
        self.conv = nn.Conv2d(cin, cout, kernel_size, stride, kernel_size // 2, bias=bias)
        if use_bn:
            self.bn = nn.BatchNorm2d(cout, momentum=bn_momentum, eps=bn_eps)
        act = build_activation(act_func)
        if act is not None:
            self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.use_bn:
            x = self.bn(x)
        if hasattr(self, "act"):
            x = self.act(x)
        return x

    @property
    def config(self) -> dict:
        return {"name": "ConvLayer", "kernel_size": self.kernel_size, "stride": self.stride, "dilation": 1,
                "groups": 1, "bias": self.bias, "has_shuffle": False, "use_se": False, "in_channels": self.cin,
                "out_channels": self.cout, "use_bn": self.use_bn, "act_func": self.act_func,
                "dropout_rate": 0, "ops_order": "weight_bn_act"}


class LinearLayer(nn.Module):
    def __init__(self, in_features: int, out_features: int, dropout_rate: float = 0.0):
        super().__init__()
        self.in_features, self.out_features, self.dropout_rate = in_features, out_features, dropout_rate
        if dropout_rate > 0:
            self.dropout = nn.Dropout(dropout_rate)
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dropout_rate > 0:
            x = self.dropout(x)
        return self.linear(x)

    @property
    def config(self) -> dict:
        return {"name": "LinearLayer", "in_features": self.in_features, "out_features": self.out_features,
                "bias": True, "use_bn": False, "act_func": None, "dropout_rate": self.dropout_rate,
                "ops_order": "weight_bn_act"}


def _conv_bn_act(cin: int, cout: int, k: int, stride: int, groups: int, act: str | None,
                 bn_momentum: float, bn_eps: float) -> nn.Sequential:
    mods: list[tuple[str, nn.Module]] = [
        ("conv", nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)),
        ("bn", nn.BatchNorm2d(cout, momentum=bn_momentum, eps=bn_eps)),
    ]
    a = build_activation(act)
    if a is not None:
        mods.append(("act", a))
    return nn.Sequential(OrderedDict(mods))


class MBConvLayer(nn.Module):
    """Inverted residual: [1x1 expand] -> kxk depthwise [-> SE] -> 1x1 project."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, stride: int = 1, expand_ratio: float = 6,
                 mid_channels: int | None = None, act_func: str = "relu6", use_se: bool = False,
                 se_mid: int | None = None, bn_momentum: float = 0.1, bn_eps: float = 1e-5):
        super().__init__()
        self.cin, self.cout, self.kernel_size, self.stride = cin, cout, kernel_size, stride
        self.expand_ratio, self.mid_channels, self.act_func, self.use_se = expand_ratio, mid_channels, act_func, use_se
        mid = round(cin * expand_ratio) if mid_channels is None else mid_channels
        if expand_ratio == 1:
            self.inverted_bottleneck = None
        else:
            self.inverted_bottleneck = _conv_bn_act(cin, mid, 1, 1, 1, act_func, bn_momentum, bn_eps)
        self.depth_conv = _conv_bn_act(mid, mid, kernel_size, stride, mid, act_func, bn_momentum, bn_eps)
        if use_se:
            from nagkit.space import make_divisible

            self.depth_conv.add_module("se", SEModule(mid, se_mid or make_divisible(mid // SEModule.REDUCTION, 8)))
        self.point_linear = _conv_bn_act(mid, cout, 1, 1, 1, None, bn_momentum, bn_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inverted_bottleneck is not None:
            x = self.inverted_bottleneck(x)
        return self.point_linear(self.depth_conv(x))

    @property
    def config(self) -> dict:
        return {"name": "MBConvLayer", "in_channels": self.cin, "out_channels": self.cout,
                "kernel_size": self.kernel_size, "stride": self.stride, "expand_ratio": self.expand_ratio,
                "mid_channels": self.mid_channels, "act_func": self.act_func, "use_se": self.use_se,
                "groups": None}


class IdentityLayer(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @property
    def config(self) -> dict:
        return {"name": "IdentityLayer", "in_channels": self.channels, "out_channels": self.channels,
                "use_bn": False, "act_func": None, "dropout_rate": 0, "ops_order": "weight_bn_act"}


class ResidualBlock(nn.Module):
    """``conv(x) + shortcut(x)``; the attribute is named ``conv`` as in current OFA."""

    def __init__(self, conv: nn.Module, shortcut: nn.Module | None):
        super().__init__()
        self.conv = conv
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shortcut is None:
            return self.conv(x)
        return self.conv(x) + self.shortcut(x)

    @property
    def config(self) -> dict:
        return {"name": "ResidualBlock", "conv": self.conv.config,
                "shortcut": self.shortcut.config if self.shortcut is not None else None}


class GlobalAvgPool(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return global_avg_pool(x)


class FlattenLinear(nn.Module):
    """Classifier as a standalone block (input N x C x 1 x 1), for latency tables."""

    def __init__(self, classifier: LinearLayer):
        super().__init__()
        self.classifier = classifier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(x, 1))
