"""Search spaces: OFA's MobileNetV3 space and configurable variants for small datasets.

A :class:`SearchSpace` is a frozen description of the elastic network (widths, strides,
activations, SE placement, elastic choices, resolutions). Everything structural derives from
it: the supernet, layer lists for latency tables, exact parameter and MAC counts, encodings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nagkit.errors import ArchError, BadInputError, short_repr
from nagkit.space.arch import Arch
from nagkit.space.layers import LayerSpec, conv_out, make_divisible
from nagkit.space.transform import IMAGENET_EVAL, InputTransform

__all__ = ["InputTransform", "LayerSpec", "SearchSpace", "conv_out", "make_divisible"]


@dataclass(frozen=True)
class SearchSpace:
    """An OFA-MobileNetV3-style elastic space.

    ``base_stage_width`` has 9 entries: stem, fixed first block, the 5 elastic stages, the
    final expand layer and the feature-mix layer; each is scaled by ``width_mult`` and rounded
    with :func:`make_divisible`.

    The input: ``in_channels``, ``mean``, ``std`` and ``transform`` (how images are resized,
    :class:`~nagkit.space.transform.InputTransform`) declare what the space's weights expect;
    :meth:`preprocessing` writes the whole recipe for one resolution. ``transform`` is not part
    of the structure: two spaces that differ only in it compare equal, and :meth:`to_dict` (what
    datasets, tables and trained models record about a space) leaves it out.
    """

    name: str
    width_mult: float = 1.0
    base_stage_width: tuple[int, ...] = (16, 16, 24, 40, 80, 112, 160, 960, 1280)
    ks_list: tuple[int, ...] = (3, 5, 7)
    expand_list: tuple[int, ...] = (3, 4, 6)
    depth_list: tuple[int, ...] = (2, 3, 4)
    resolutions: tuple[int, ...] = tuple(range(128, 225, 4))
    stage_strides: tuple[int, ...] = (2, 2, 2, 1, 2)
    stage_acts: tuple[str, ...] = ("relu", "relu", "h_swish", "h_swish", "h_swish")
    stage_se: tuple[bool, ...] = (False, True, False, True, True)
    first_block_act: str = "relu"
    first_block_se: bool = False
    stem_stride: int = 2
    stem_act: str = "h_swish"
    in_channels: int = 3
    n_classes: int = 1000
    dropout: float = 0.1
    bn_momentum: float = 0.1
    bn_eps: float = 1e-5
    description: str = ""
    # The input the weights expect (ImageNet's by default: OFA's weights).
    mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    std: tuple[float, ...] = (0.229, 0.224, 0.225)
    labels: tuple[str, ...] = field(default=(), repr=False)
    transform: InputTransform = field(default=IMAGENET_EVAL, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "transform", InputTransform.from_value(self.transform))
        n = len(self.stage_strides)
        if len(self.base_stage_width) != n + 4:
            raise BadInputError(
                f"space {self.name!r}: base_stage_width needs {n + 4} entries "
                f"(stem, first block, {n} stages, final expand, feature mix), got {len(self.base_stage_width)}"
            )
        for fname in ("stage_acts", "stage_se"):
            if len(getattr(self, fname)) != n:
                raise BadInputError(f"space {self.name!r}: {fname} needs {n} entries (one per stage)")
        for fname in ("ks_list", "expand_list", "depth_list", "resolutions"):
            v = getattr(self, fname)
            if not v:
                raise BadInputError(f"space {self.name!r}: {fname} is empty")
            if tuple(sorted(set(v))) != tuple(v):
                object.__setattr__(self, fname, tuple(sorted(set(v))))
        if any(k % 2 == 0 for k in self.ks_list):
            raise BadInputError(f"space {self.name!r}: kernels must be odd, got {self.ks_list}")
        if self.in_channels != len(self.mean) or self.in_channels != len(self.std):
            object.__setattr__(self, "mean", tuple([self.mean[0]] * self.in_channels))
            object.__setattr__(self, "std", tuple([self.std[0]] * self.in_channels))

    # -- structure -------------------------------------------------------------------------
    @property
    def n_stages(self) -> int:
        return len(self.stage_strides)

    @property
    def max_depth(self) -> int:
        return max(self.depth_list)

    @property
    def n_block_slots(self) -> int:
        return self.n_stages * self.max_depth

    @property
    def widths(self) -> tuple[int, ...]:
        """Rounded widths: stem, first block, stages..., final expand, feature mix."""
        return tuple(make_divisible(w * self.width_mult, 8) for w in self.base_stage_width)

    @property
    def stem_width(self) -> int:
        return self.widths[0]

    @property
    def first_block_width(self) -> int:
        return self.widths[1]

    @property
    def stage_widths(self) -> tuple[int, ...]:
        return self.widths[2 : 2 + self.n_stages]

    @property
    def final_expand_width(self) -> int:
        return self.widths[-2]

    @property
    def last_channel(self) -> int:
        return self.widths[-1]

    def mid_channels(self, cin: int, expand: float) -> int:
        return make_divisible(round(cin * expand), 8)

    @property
    def size(self) -> int:
        """Number of distinct architectures (active blocks only)."""
        per_block = len(self.ks_list) * len(self.expand_list)
        per_stage = sum(per_block**d for d in self.depth_list)
        return len(self.resolutions) * per_stage**self.n_stages

    def replace(self, **changes: Any) -> SearchSpace:
        for k, v in list(changes.items()):
            if isinstance(v, list):
                changes[k] = tuple(v)
        return dataclasses.replace(self, **changes)

    def with_labels(self, labels: Sequence[str]) -> SearchSpace:
        """This space with a classifier for ``labels`` (a fine-tuned head: params, MACs, outputs)."""
        labels = tuple(str(v) for v in labels)
        if len(labels) < 1:
            raise BadInputError(f"space {self.name!r}: a classifier needs at least one label")
        return self.replace(n_classes=len(labels), labels=labels)

    def to_dict(self) -> dict[str, Any]:
        """The structure (every field but ``transform``); :meth:`from_dict` reads it back."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "transform"}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}

    def preprocessing(self, r: int) -> dict[str, Any]:
        """How an image becomes this space's input at resolution ``r`` (color, resize, crop,
        scale, mean/std, layout): what bundles record (:meth:`InputTransform.record`)."""
        return self.transform.record(r, self.in_channels, self.mean, self.std)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchSpace:
        """A space from :meth:`to_dict`'s fields, plus an optional ``transform`` table."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            from nagkit.errors import did_you_mean

            sugg = {u: did_you_mean(u, names) for u in unknown[:5]}
            msg = ", ".join(short_repr(u, 60) + (f" ({s})" if s else "") for u, s in sugg.items())
            raise BadInputError(f"unknown space field(s) {msg}; valid fields: {', '.join(sorted(names))}")
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()}
        return cls(**kw)

    # -- architectures ---------------------------------------------------------------------
    def validate(self, arch: Arch) -> Arch:
        """Raise :class:`ArchError` naming the field and the allowed values."""
        if arch.r not in self.resolutions:
            raise ArchError(
                f"arch resolution r={arch.r} is not in space {self.name!r}; allowed: "
                f"{_fmt_range(self.resolutions)}"
            )
        if len(arch.stages) != self.n_stages:
            raise ArchError(
                f"arch has {len(arch.stages)} stages; space {self.name!r} has {self.n_stages} (field 'd')"
            )
        for si, st in enumerate(arch.stages):
            if len(st) not in self.depth_list:
                raise ArchError(
                    f"arch depth d[{si}]={len(st)} is not allowed in space {self.name!r}; "
                    f"allowed depths: {', '.join(map(str, self.depth_list))}"
                )
            for bi, (k, e) in enumerate(st):
                if k not in self.ks_list:
                    raise ArchError(
                        f"arch kernel ks (stage {si}, block {bi}) = {k} is not allowed in space "
                        f"{self.name!r}; allowed kernels: {', '.join(map(str, self.ks_list))}"
                    )
                if e not in self.expand_list:
                    raise ArchError(
                        f"arch expand ratio e (stage {si}, block {bi}) = {e} is not allowed in space "
                        f"{self.name!r}; allowed expand ratios: {', '.join(map(str, self.expand_list))}"
                    )
        return arch

    def parse_arch(self, value: Any) -> Arch:
        """Parse (canonical string, OFA dict or its JSON) and validate against this space."""
        arch = Arch.parse(value, max_depth=self.max_depth)
        return self.validate(arch)

    def to_ofa_dict(self, arch: Arch) -> dict[str, Any]:
        return arch.to_ofa_dict(self.max_depth)

    def largest(self, r: int | None = None) -> Arch:
        b = (max(self.ks_list), max(self.expand_list))
        return Arch(r or max(self.resolutions), tuple((b,) * self.max_depth for _ in range(self.n_stages)))

    def smallest(self, r: int | None = None) -> Arch:
        b = (min(self.ks_list), min(self.expand_list))
        d = min(self.depth_list)
        return Arch(r or min(self.resolutions), tuple((b,) * d for _ in range(self.n_stages)))

    # -- concrete layers -------------------------------------------------------------------
    def layers(self, arch: Arch) -> list[LayerSpec]:
        """The static network of ``arch`` as a list of layers with shapes (for tables/counts)."""
        self.validate(arch)
        out: list[LayerSpec] = []
        hw = arch.r
        c = self.stem_width
        ohw = conv_out(hw, self.stem_stride)
        out.append(LayerSpec("stem", hw, ohw, self.in_channels, c, k=3, stride=self.stem_stride,
                             act=self.stem_act))
        hw = ohw
        fb = self.first_block_width
        out.append(self._mbconv(hw, c, fb, 3, 1, 1, self.first_block_se, self.first_block_act, mid=c))
        c = fb
        for si, st in enumerate(arch.stages):
            cout = self.stage_widths[si]
            for bi, (k, e) in enumerate(st):
                s = self.stage_strides[si] if bi == 0 else 1
                layer = self._mbconv(hw, c, cout, k, s, e, self.stage_se[si], self.stage_acts[si])
                out.append(layer)
                hw, c = layer.out_hw, cout
        fe = self.final_expand_width
        out.append(LayerSpec("final_expand", hw, hw, c, fe, act="h_swish"))
        out.append(LayerSpec("pool", hw, 1, fe, fe, bn=False))
        out.append(LayerSpec("feature_mix", 1, 1, fe, self.last_channel, act="h_swish", bn=False))
        out.append(LayerSpec("classifier", 1, 1, self.last_channel, self.n_classes, bn=False, bias=True))
        return out

    def _mbconv(self, hw: int, cin: int, cout: int, k: int, s: int, e: float, se: bool, act: str,
                mid: int | None = None) -> LayerSpec:
        mid = self.mid_channels(cin, e) if mid is None else mid
        se_mid = make_divisible(mid // 4, 8) if se else 0
        return LayerSpec("mbconv", hw, conv_out(hw, s), cin, cout, k=k, stride=s, mid=mid, expand=e,
                         se=se, se_mid=se_mid, act=act, skip=(s == 1 and cin == cout))

    def params(self, arch: Arch) -> int:
        """Exact trainable parameter count of the extracted subnet."""
        from nagkit.space.counts import count_params

        return count_params(self.layers(arch))

    def macs(self, arch: Arch) -> int:
        """Multiply-accumulates of convolutions and linear layers (what a forward hook counts)."""
        from nagkit.space.counts import count_macs

        return count_macs(self.layers(arch))

    def peak_activation(self, arch: Arch) -> int:
        """Peak activation elements of the exported graph run one operator at a time
        (:func:`nagkit.space.counts.count_peak`; docs/decisions.md 39)."""
        from nagkit.space.counts import count_peak

        return count_peak(self.layers(arch))

    # -- description -----------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "width_mult": self.width_mult,
            "widths": {
                "stem": self.stem_width,
                "first_block": self.first_block_width,
                "stages": list(self.stage_widths),
                "final_expand": self.final_expand_width,
                "feature_mix": self.last_channel,
            },
            "stage_strides": list(self.stage_strides),
            "stage_acts": list(self.stage_acts),
            "stage_se": list(self.stage_se),
            "stem_stride": self.stem_stride,
            "kernels": list(self.ks_list),
            "expand_ratios": list(self.expand_list),
            "depths": list(self.depth_list),
            "resolutions": list(self.resolutions),
            "in_channels": self.in_channels,
            "n_classes": self.n_classes,
            "input": {"channels": self.in_channels, "mean": list(self.mean), "std": list(self.std),
                      **self.transform.to_dict()},
            "n_architectures": self.size,
        }


def _fmt_range(vals: Sequence[int]) -> str:
    vals = list(vals)
    if len(vals) > 3:
        steps = {b - a for a, b in zip(vals, vals[1:])}
        if len(steps) == 1:
            return f"{vals[0]}..{vals[-1]} in steps of {steps.pop()}"
    return ", ".join(map(str, vals))
