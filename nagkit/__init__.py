"""nagkit: the most accurate model that meets a latency budget on a device.

The Python API: ``nagkit.profile``, ``nagkit.build``, ``nagkit.generate``, ``nagkit.check``
(:mod:`nagkit.api`). Importing the package is cheap: the API, torch, LiteRT and adb-shell are
imported on first use, so ``nagkit --help`` stays fast.
"""

from nagkit.version import __version__

__all__ = ["__version__", "build", "check", "generate", "profile"]

_API = ("build", "check", "generate", "profile")


def __getattr__(name: str):
    if name in _API:
        from nagkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'nagkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
