"""How a space's input images are preprocessed, as bundles record it (``input.preprocessing``
of the manifest, validated by ``nagkit/export/manifest.schema.json``).

Two pipelines: OFA's ImageNet evaluation transform for the ImageNet spaces (their weights are
OFA's), and nagkit's own for every other space: the images nagkit trains and evaluates on are
resized straight to the arch's resolution (:func:`nagkit.images.fmnist.preprocess`).
"""

from __future__ import annotations

import math
from typing import Any

from nagkit.space.presets import dataset_of


def imagenet_eval(space, r: int) -> dict[str, Any]:
    """OFA's ImageNet evaluation transform: resize to ceil(r / 0.875), center-crop r, /255, mean/std."""
    return {
        "color": "RGB" if space.in_channels == 3 else "grayscale",
        "scale": 1 / 255,
        "mean": [float(m) for m in space.mean],
        "std": [float(s) for s in space.std],
        "resize": int(math.ceil(r / 0.875)),
        "center_crop": int(r),
        "interpolation": "bilinear",
        "note": "resize the shorter side, center-crop, scale pixels to [0, 1], then (x - mean) / std per "
                "channel; feed NCHW float32",
    }


def resize_to_resolution(space, r: int) -> dict[str, Any]:
    """nagkit's pipeline: the whole image resized to r x r (bilinear, no antialias), /255, mean/std."""
    return {
        "color": "RGB" if space.in_channels == 3 else "grayscale",
        "scale": 1 / 255,
        "mean": [float(m) for m in space.mean],
        "std": [float(s) for s in space.std],
        "resize": int(r),
        "center_crop": int(r),
        "interpolation": "bilinear",
        "note": "resize the whole image to r x r (bilinear, no antialias; no crop), scale pixels to [0, 1], then "
                "(x - mean) / std per channel; feed NCHW float32 (as nagkit.images.fmnist.preprocess)",
    }


def preprocessing_for(space, r: int) -> dict[str, Any]:
    """The preprocessing of ``space``'s inputs at resolution ``r``."""
    return imagenet_eval(space, r) if dataset_of(space) == "imagenet" else resize_to_resolution(space, r)
