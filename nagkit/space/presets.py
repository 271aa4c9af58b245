"""Registered spaces. ``get_space(name)`` raises with a did-you-mean on a miss."""

from __future__ import annotations

from nagkit.registry import Registry
from nagkit.space.space import SearchSpace

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


def get_space(name: str | SearchSpace) -> SearchSpace:
    if isinstance(name, SearchSpace):
        return name
    return SPACES.get(name)


def list_spaces() -> list[str]:
    return SPACES.names()
