"""The input transform a space declares: how an image becomes its networks' input tensor.

Every :class:`~nagkit.space.space.SearchSpace` carries an :class:`InputTransform` (its
``transform`` field) next to the fields it already had for the input (``in_channels``, ``mean``,
``std``). Together they are the whole recipe, applied in this order::

    color       convert the decoded image to RGB (in_channels 3) or grayscale (in_channels 1)
    resize      "shorter-side": the shorter side to ceil(r / crop_fraction), keeping the aspect
                ratio, then center-crop r x r (OFA's ImageNet evaluation transform);
                "whole": the whole image to r x r (no crop; the aspect ratio is not kept)
    scale       pixel values times 1/255, to [0, 1] (resizing works on these floats)
    normalize   (x - mean) / std per channel
    layout      NCHW float32

:meth:`InputTransform.record` writes it out for one resolution (a bundle manifest's
``input.preprocessing``); ``nagkit.images.transforms`` implements it with torchvision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from nagkit.errors import BadInputError, reject_unknown_keys

RESIZE_RULES = ("shorter-side", "whole")
INTERPOLATIONS = ("bilinear", "bicubic", "nearest")
LAYOUTS = ("NCHW",)
SCALE = 1 / 255
ORDER = ("color", "resize", "center_crop", "scale", "normalize", "layout")


@dataclass(frozen=True)
class InputTransform:
    """How images are resized for a space's networks (channels, mean and std are the space's).

    ``resize``: one of :data:`RESIZE_RULES`. ``crop_fraction``: r / (the resized shorter side)
    for ``shorter-side`` (OFA: 0.875); 1.0 for ``whole``. ``antialias``: whether shrinking
    low-pass filters first (PIL always does; torch only when asked); it changes nothing when an
    image is enlarged. ``layout``: the tensor layout the networks take.
    """

    resize: str = "shorter-side"
    crop_fraction: float = 0.875
    interpolation: str = "bilinear"
    antialias: bool = True
    layout: str = "NCHW"

    def __post_init__(self) -> None:
        if self.resize not in RESIZE_RULES:
            raise BadInputError(f"input transform resize {self.resize!r} is not valid; valid: {', '.join(RESIZE_RULES)}")
        if self.interpolation not in INTERPOLATIONS:
            raise BadInputError(f"input transform interpolation {self.interpolation!r} is not valid; "
                                f"valid: {', '.join(INTERPOLATIONS)}")
        if self.layout not in LAYOUTS:
            raise BadInputError(f"input transform layout {self.layout!r} is not valid; valid: {', '.join(LAYOUTS)}")
        if not isinstance(self.antialias, bool):
            raise BadInputError(f"input transform antialias must be true or false, got {self.antialias!r}")
        f = self.crop_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise BadInputError(f"input transform crop_fraction must be a number in (0, 1], got {f!r}")
        if self.resize == "whole" and f != 1:
            raise BadInputError(f"input transform resize 'whole' does not crop: crop_fraction must be 1, got {f!r}")

    @classmethod
    def from_value(cls, value: InputTransform | Mapping[str, Any]) -> InputTransform:
        """An InputTransform, or one from a mapping (a workspace's ``[space.transform]``)."""
        if isinstance(value, InputTransform):
            return value
        if not isinstance(value, Mapping):
            raise BadInputError(f"a space's transform must be a table of {', '.join(cls.__dataclass_fields__)}, "
                                f"got {type(value).__name__}")
        reject_unknown_keys(value, cls.__dataclass_fields__, "the space's transform")
        return cls(**dict(value))

    def resize_size(self, r: int) -> int:
        """The size the resize step makes: the shorter side (``shorter-side``) or both sides."""
        return int(math.ceil(r / self.crop_fraction)) if self.resize == "shorter-side" else int(r)

    def record(self, r: int, channels: int, mean: Sequence[float], std: Sequence[float]) -> dict[str, Any]:
        """The concrete recipe at resolution ``r`` (a manifest's ``input.preprocessing``)."""
        return {
            "color": "RGB" if channels == 3 else "grayscale",
            "channels": int(channels),
            "resize_rule": self.resize,
            "resize": self.resize_size(r),
            "center_crop": int(r) if self.resize == "shorter-side" else None,
            "interpolation": self.interpolation,
            "antialias": self.antialias,
            "scale": SCALE,
            "mean": [float(m) for m in mean],
            "std": [float(s) for s in std],
            "layout": self.layout,
            "dtype": "float32",
            "order": list(ORDER),
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# OFA's ImageNet evaluation transform (the default) and nagkit's own for images it trains on.
IMAGENET_EVAL = InputTransform()
RESIZE_WHOLE = InputTransform(resize="whole", crop_fraction=1.0, antialias=False)
