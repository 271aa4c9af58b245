"""The static (extracted) MobileNetV3 and per-layer builders.

``StaticNet`` has OFA's module names, so its state_dict keys equal OFA's subnet keys, and its
``config`` is OFA's config dict; ``StaticNet.from_config(cfg)`` rebuilds it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nagkit.space import Arch, LayerSpec, SearchSpace, layer_input_shape
from nagkit.supernet.layers import (
    ConvLayer, FlattenLinear, GlobalAvgPool, IdentityLayer, LinearLayer, MBConvLayer, ResidualBlock,
    global_avg_pool,
)


def _mbconv_from_spec(l: LayerSpec, bn: tuple[float, float]) -> ResidualBlock:
    conv = MBConvLayer(l.cin, l.cout, l.k, l.stride, l.expand, mid_channels=None if l.expand == 1 else l.mid,
                       act_func=l.act, use_se=l.se, se_mid=l.se_mid or None, bn_momentum=bn[0], bn_eps=bn[1])
    return ResidualBlock(conv, IdentityLayer(l.cin) if l.skip else None)


def build_layer(spec: LayerSpec, bn: tuple[float, float] = (0.1, 1e-5)) -> nn.Module:
    """One layer of a static network as a standalone module with input
    :func:`nagkit.space.layer_input_shape`."""
    if spec.kind == "stem":
        return ConvLayer(spec.cin, spec.cout, spec.k, spec.stride, act_func=spec.act, bn_momentum=bn[0], bn_eps=bn[1])
    if spec.kind == "mbconv":
        return _mbconv_from_spec(spec, bn)
    if spec.kind == "final_expand":
        return ConvLayer(spec.cin, spec.cout, 1, 1, act_func=spec.act, bn_momentum=bn[0], bn_eps=bn[1])
    if spec.kind == "pool":
        return GlobalAvgPool()
    if spec.kind == "feature_mix":
        return ConvLayer(spec.cin, spec.cout, 1, 1, use_bn=False, act_func=spec.act)
    if spec.kind == "classifier":
        return FlattenLinear(LinearLayer(spec.cin, spec.cout))
    raise ValueError(f"unknown layer kind {spec.kind!r}")


class StaticNet(nn.Module):
    """A plain MobileNetV3 subnet (OFA's ``MobileNetV3`` with the same module names)."""

    def __init__(self, first_conv: ConvLayer, blocks: list[nn.Module], final_expand_layer: ConvLayer,
                 feature_mix_layer: ConvLayer, classifier: LinearLayer, meta: dict[str, Any] | None = None):
        super().__init__()
        self.first_conv = first_conv
        self.blocks = nn.ModuleList(blocks)
        self.final_expand_layer = final_expand_layer
        self.feature_mix_layer = feature_mix_layer
        self.classifier = classifier
        self.meta = dict(meta or {})
        self._bn = (0.1, 1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first_conv(x)
        for b in self.blocks:
            x = b(x)
        x = self.final_expand_layer(x)
        x = global_avg_pool(x)
        x = self.feature_mix_layer(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)

    @classmethod
    def from_layers(cls, layers: list[LayerSpec], dropout: float = 0.0, bn: tuple[float, float] = (0.1, 1e-5),
                    meta: dict[str, Any] | None = None) -> StaticNet:
        by_kind = {l.kind: l for l in layers if l.kind != "mbconv"}
        blocks = [_mbconv_from_spec(l, bn) for l in layers if l.kind == "mbconv"]
        st, fe, fm, cl = by_kind["stem"], by_kind["final_expand"], by_kind["feature_mix"], by_kind["classifier"]
        net = cls(
            ConvLayer(st.cin, st.cout, st.k, st.stride, act_func=st.act, bn_momentum=bn[0], bn_eps=bn[1]),
            blocks,
            ConvLayer(fe.cin, fe.cout, 1, 1, act_func=fe.act, bn_momentum=bn[0], bn_eps=bn[1]),
            ConvLayer(fm.cin, fm.cout, 1, 1, use_bn=False, act_func=fm.act),
            LinearLayer(cl.cin, cl.cout, dropout_rate=dropout),
            meta=meta,
        )
        net._bn = bn
        return net

    @classmethod
    def from_arch(cls, space: SearchSpace, arch: Arch, seed: int | None = None) -> StaticNet:
        """A randomly initialised subnet (seeded when ``seed`` is given)."""
        ctx = torch.random.fork_rng(devices=[]) if seed is not None else _null()
        with ctx:
            if seed is not None:
                torch.manual_seed(seed)
            net = cls.from_layers(space.layers(arch), dropout=space.dropout, bn=(space.bn_momentum, space.bn_eps),
                                  meta={"space": space.name, "arch": str(arch), "resolution": arch.r})
        return net.eval()

    @property
    def config(self) -> dict[str, Any]:
        """OFA's config dict for this network (plus nagkit's ``meta``)."""
        return {
            "name": "MobileNetV3",
            "bn": {"momentum": self._bn[0], "eps": self._bn[1], "ws_eps": None},
            "first_conv": self.first_conv.config,
            "blocks": [b.config for b in self.blocks],
            "final_expand_layer": self.final_expand_layer.config,
            "feature_mix_layer": self.feature_mix_layer.config,
            "classifier": self.classifier.config,
            "meta": self.meta,
        }

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> StaticNet:
        bnc = cfg.get("bn") or {}
        bn = (bnc.get("momentum", 0.1), bnc.get("eps", 1e-5))

        def conv(c):
            return ConvLayer(c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"], use_bn=c["use_bn"],
                             act_func=c["act_func"], bias=c.get("bias", False), bn_momentum=bn[0], bn_eps=bn[1])

        blocks = []
        for b in cfg["blocks"]:
            c = b["conv"]
            m = MBConvLayer(c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"], c["expand_ratio"],
                            mid_channels=c.get("mid_channels"), act_func=c["act_func"], use_se=c["use_se"],
                            bn_momentum=bn[0], bn_eps=bn[1])
            sc = b.get("shortcut")
            blocks.append(ResidualBlock(m, IdentityLayer(sc["in_channels"]) if sc else None))
        cl = cfg["classifier"]
        net = cls(conv(cfg["first_conv"]), blocks, conv(cfg["final_expand_layer"]), conv(cfg["feature_mix_layer"]),
                  LinearLayer(cl["in_features"], cl["out_features"], cl.get("dropout_rate", 0.0)),
                  meta=cfg.get("meta"))
        net._bn = bn
        return net

    @property
    def input_resolution(self) -> int | None:
        return self.meta.get("resolution")

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
