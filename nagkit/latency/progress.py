"""Progress on stderr (moved to :mod:`nagkit.progress`, shared by every layer)."""

from nagkit.progress import progress_bar

__all__ = ["progress_bar"]
