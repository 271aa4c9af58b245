"""A space's declared input transform, applied to images (torchvision) and written for bundles.

:func:`preprocessing_for` is what a bundle records (``input.preprocessing`` of the manifest,
from the space's :class:`~nagkit.space.transform.InputTransform`). :func:`apply` implements
the same recipe on uint8 image tensors: it is what fine-tuning trains and evaluates with, and for
the Fashion-MNIST space it computes exactly :func:`nagkit.images.fmnist.preprocess` (one
recipe, tested equal). :func:`augment` is the train-time augmentation of fine-tuning:

- ``shorter-side`` spaces (OFA's ImageNet weights): a random resized crop of 25-100% of the
  image area and aspect ratio 3/4..4/3, resized to r x r, then a horizontal flip (p = 0.5);
- ``whole`` spaces (nagkit's Fashion-MNIST): the whole image to r x r, a random translation
  of up to r/14 pixels (zero padding: 2 pixels at r = 28, as the supernet was trained), then a
  horizontal flip (p = 0.5).

Every random draw comes from the ``torch.Generator`` passed in.
"""

from __future__ import annotations

import math
from typing import Any

from nagkit.space.transform import InputTransform

_INTERP = {"bilinear": "BILINEAR", "bicubic": "BICUBIC", "nearest": "NEAREST"}


def preprocessing_for(space, r: int) -> dict[str, Any]:
    """The preprocessing of ``space``'s inputs at resolution ``r`` (the space's declaration)."""
    return space.preprocessing(r)


def _mode(t: InputTransform):
    from torchvision.transforms.v2 import InterpolationMode

    return getattr(InterpolationMode, _INTERP[t.interpolation])


def to_float(images):
    """uint8 ``[C, H, W]`` or ``[N, C, H, W]`` -> float in [0, 1] (the ``scale`` step)."""
    import torch

    return torch.as_tensor(images).float().div_(255.0)


def resize(x, space, r: int):
    """The ``resize`` (+ ``center_crop``) step of ``space``'s transform on float images."""
    from torchvision.transforms.v2 import functional as TF

    t: InputTransform = space.transform
    if t.resize == "whole":
        if x.shape[-1] == r and x.shape[-2] == r:
            return x
        return TF.resize(x, [r, r], interpolation=_mode(t), antialias=t.antialias)
    x = TF.resize(x, [t.resize_size(r)], interpolation=_mode(t), antialias=t.antialias)  # the shorter side
    return TF.center_crop(x, [r, r])


def normalize(x, space):
    from torchvision.transforms.v2 import functional as TF

    return TF.normalize(x, list(space.mean), list(space.std))


def apply(images, space, r: int):
    """uint8 images (``[C, H, W]`` or ``[N, C, H, W]``, C = the space's channels) -> the
    normalised float input at resolution ``r``: scale, resize (and crop), normalize."""
    return normalize(resize(to_float(images), space, r), space)


def augment(image, space, r: int, generator):
    """A random train-time view of one uint8 ``[C, H, W]`` image at resolution ``r``, normalised
    (the module docstring says which); draws from ``generator``."""
    import torch
    from torchvision.transforms.v2 import functional as TF

    t: InputTransform = space.transform
    x = to_float(image)
    if t.resize == "shorter-side":
        top, left, h, w = _resized_crop_box(x.shape[-2], x.shape[-1], generator)
        x = TF.resized_crop(x, top, left, h, w, [r, r], interpolation=_mode(t), antialias=t.antialias)
    else:
        x = resize(x, space, r)
        pad = max(1, round(r / 14))
        oy, ox = (int(v) for v in torch.randint(0, 2 * pad + 1, (2,), generator=generator))
        x = torch.nn.functional.pad(x, (pad, pad, pad, pad))[..., oy:oy + r, ox:ox + r]
    if bool(torch.rand((), generator=generator) < 0.5):
        x = x.flip(-1)
    return normalize(x, space)


def _resized_crop_box(height: int, width: int, generator, scale=(0.25, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop box (10 tries, then a center crop), drawn from ``generator``."""
    import torch

    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        u = torch.rand(2, generator=generator)
        target = area * (scale[0] + float(u[0]) * (scale[1] - scale[0]))
        aspect = math.exp(log_ratio[0] + float(u[1]) * (log_ratio[1] - log_ratio[0]))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator))
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w
