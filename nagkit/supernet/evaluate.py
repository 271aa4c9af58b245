"""Subnet accuracy with inherited weights: extract -> BN recalibration -> accuracy.

Images stay uint8 tensors (on the evaluation device) until a batch is preprocessed at the
subnet's resolution with :func:`nagkit.images.fmnist.preprocess`, the same function used for
training and for exported models.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from nagkit.space import Arch
from nagkit.supernet.bn import recalibrate_bn


def image_batches(images: torch.Tensor, resolution: int, mean, std, batch_size: int,
                  channels_last: bool = False) -> Iterator[torch.Tensor]:
    from nagkit.images.fmnist import preprocess

    for i in range(0, len(images), batch_size):
        x = preprocess(images[i:i + batch_size], resolution, mean, std)
        yield x.contiguous(memory_format=torch.channels_last) if channels_last else x


@torch.no_grad()
def accuracy(net: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, resolution: int, mean, std,
             batch_size: int = 1000, amp: bool = False, channels_last: bool = False) -> float:
    """Top-1 accuracy (a fraction) of ``net`` in eval mode on uint8 ``images``."""
    net.eval()
    correct = 0
    dev_type = images.device.type
    for i, x in enumerate(image_batches(images, resolution, mean, std, batch_size, channels_last)):
        with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=amp):
            out = net(x)
        y = labels[i * batch_size:(i + 1) * batch_size]
        correct += int((out.argmax(1) == y).sum())
    return correct / max(len(labels), 1)


@torch.no_grad()
def subnet_accuracy(supernet, arch: Arch, calib_images: torch.Tensor, images: torch.Tensor, labels: torch.Tensor,
                    *, batch_size: int = 1000, calib_batch_size: int = 500, amp: bool = False,
                    channels_last: bool = False) -> float:
    """Accuracy of ``arch`` with weights inherited from ``supernet`` and BN statistics
    recalibrated on ``calib_images`` (uint8, no augmentation). The supernet is not modified
    (apart from its active arch)."""
    space = supernet.space
    sub = supernet.extract(arch)
    if channels_last:
        sub = sub.to(memory_format=torch.channels_last)
    batches = image_batches(calib_images, arch.r, space.mean, space.std, calib_batch_size, channels_last)
    if amp:
        with torch.autocast(calib_images.device.type, dtype=torch.bfloat16):
            recalibrate_bn(sub, batches)
    else:
        recalibrate_bn(sub, batches)
    return accuracy(sub, images, labels, arch.r, space.mean, space.std, batch_size, amp, channels_last)


@torch.no_grad()
def subnet_accuracy_fixed(scratch, arch: Arch, calib_images: torch.Tensor, images: torch.Tensor, labels: torch.Tensor,
                          *, batch_size: int = 1000, calib_batch_size: int = 500, amp: bool = False,
                          channels_last: bool = False) -> float:
    """:func:`subnet_accuracy` computed inside ``scratch``: a copy of the supernet in
    fixed-shape mode (``set_fixed_shape(True)``) whose BN statistics this overwrites. The
    active channels' recalibrated statistics and outputs equal the extracted subnet's, while
    every arch runs at the same tensor shapes (no per-shape cuDNN set-up on a GPU)."""
    space = scratch.space
    scratch.set_active(arch)
    batches = image_batches(calib_images, arch.r, space.mean, space.std, calib_batch_size, channels_last)
    with torch.autocast(calib_images.device.type, dtype=torch.bfloat16, enabled=amp):
        recalibrate_bn(scratch, batches)
    return accuracy(scratch, images, labels, arch.r, space.mean, space.std, batch_size, amp, channels_last)
