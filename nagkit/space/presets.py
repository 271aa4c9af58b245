"""Registered spaces. ``get_space(name)`` raises with a did-you-mean on a miss."""

from __future__ import annotations

from nagkit.registry import Registry
from nagkit.space.space import SearchSpace
from nagkit.space.transform import RESIZE_WHOLE

SPACES: Registry[SearchSpace] = Registry("space", hint="list them with `nagkit space show`")

SPACES.register(
    "ofa-mbv3-w1.0",
    SearchSpace(
        name="ofa-mbv3-w1.0",
        width_mult=1.0,
        resolutions=tuple(range(128, 225, 4)),
        description="OFA MobileNetV3 (ofa_mbv3_d234_e346_k357_w1.0), ImageNet, 1000 classes",
    ),
)
SPACES.register(
    "ofa-mbv3-w1.2",
    SearchSpace(
        name="ofa-mbv3-w1.2",
        width_mult=1.2,
        resolutions=tuple(range(160, 225, 4)),
        description="OFA MobileNetV3 (ofa_mbv3_d234_e346_k357_w1.2), ImageNet, 1000 classes",
    ),
)

# Fashion-MNIST (the embedded default workspace, nagkit/resources/workspaces/fmnist). 28x28 grayscale
# upscaled to r in {28, 32, 36, 40}; stem stride 1 (total stride 16, so r=28 ends at 2x2);
# width 0.5 (1.8M supernet parameters, 7 MB checkpoint). Why: docs/decisions.md.
FMNIST_LABELS = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                 "Ankle boot")
SPACES.register(
    "fmnist-mbv3-w0.5",
    SearchSpace(
        name="fmnist-mbv3-w0.5",
        width_mult=0.5,
        resolutions=(28, 32, 36, 40),
        stem_stride=1,
        in_channels=1,
        n_classes=10,
        dropout=0.1,
        mean=(0.2860,),
        std=(0.3530,),
        labels=FMNIST_LABELS,
        # the 28x28 image resized to r (bilinear, no antialias), as nagkit.images.fmnist.preprocess
        # does for training and evaluation: no crop
        transform=RESIZE_WHOLE,
        description="OFA MobileNetV3 space for Fashion-MNIST: 1x28x28 input upscaled to 28..40, stem stride 1, "
                    "width 0.5, 10 classes",
    ),
)


def get_space(name: str | SearchSpace) -> SearchSpace:
    if isinstance(name, SearchSpace):
        return name
    return SPACES.get(name)


def list_spaces() -> list[str]:
    return SPACES.names()
