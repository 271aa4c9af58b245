"""nagkit: the most accurate model that meets a latency budget on a device.

Importing the package is cheap: torch, LiteRT and adb-shell are imported on demand by the
modules that need them, so ``nagkit --help`` stays fast.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
