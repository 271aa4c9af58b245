"""Search methods by name: :func:`make_method` over the :data:`~nagkit.search.base.METHODS`
table, with the built-in methods of :mod:`nagkit.search.methods` registered.

It sits above both: ``methods`` registers into ``base``'s table, and ``base`` never imports
``methods``.
"""

from __future__ import annotations

from nagkit.errors import BadInputError
from nagkit.search import methods as _methods  # noqa: F401 - registers the built-in methods
from nagkit.search.base import METHODS, SearchMethod, SearchProblem


def method_names() -> list[str]:
    """The registered search methods, sorted."""
    return METHODS.names()


def make_method(name: str, problem: SearchProblem, seed: int = 0, **options) -> SearchMethod:
    """The search method ``name`` for ``problem`` (a did-you-mean on an unknown name; options a
    method does not take are bad input)."""
    factory = METHODS.get(name)
    try:
        return factory(problem, seed, **options)
    except TypeError as e:
        raise BadInputError(f"bad options for search method {name!r}: {e}") from None
