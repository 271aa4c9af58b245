"""Where the tests find the data that lives outside the repository (``../shared`` beside the
project root, or ``$NAGKIT_SHARED_DIR``), and the marker for the tests that need it.

A test that reads such data says so with ``@needs_shared("data/ofa-golden/...")`` (paths
relative to the shared folder). Where a path is missing, tests/conftest.py skips the test with
one reason naming the path and the environment variable; with ``NAGKIT_REQUIRE_SHARED=1`` (set by
``.ci/run``) it fails it instead, so CI never skips them silently. Nothing here reads the data at
import time: a clone without ``../shared`` collects with no error.

This module imports no test framework beyond pytest's marker, so ``benchmarks/`` scripts may
import it too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_ENV = "NAGKIT_SHARED_DIR"
REQUIRE_ENV = "NAGKIT_REQUIRE_SHARED"
SHARED = Path(os.environ.get(SHARED_ENV) or ROOT / ".." / "shared").resolve()
GOLDEN = SHARED / "data" / "ofa-golden"
NOTE10 = SHARED / "data" / "ofa-note10"
BENCHMARK_MODEL = SHARED / "data" / "benchmark_model"

MARKER = "shared_data"
SKIP_PREFIX = "needs shared data"  # every skip for missing shared data starts so (conftest's summary finds them)


def needs_shared(*paths: str | Path) -> pytest.MarkDecorator:
    """Mark a test (or a module, as ``pytestmark``) as reading these paths of the shared folder.
    Absolute paths under :data:`SHARED` are accepted too."""
    rel = [str(Path(p).relative_to(SHARED)) if Path(p).is_absolute() else str(p) for p in paths]
    return getattr(pytest.mark, MARKER)(*rel)


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def missing(paths: tuple[str, ...]) -> list[str]:
    """The marked paths that are not in the shared folder."""
    return [p for p in paths if not (SHARED / p).exists()]


def reason(absent: list[str]) -> str:
    """One line: what is missing, where it was looked for, and how to point the tests at it."""
    where = f"${SHARED_ENV}" if os.environ.get(SHARED_ENV) else "../shared beside the repository"
    return (f"{SKIP_PREFIX}: {', '.join(absent)} not found in {SHARED} ({where}); "
            f"set {SHARED_ENV}=/path/to/shared to use a copy elsewhere")


def read_json(path: Path) -> Any:
    """``path``'s JSON, or None where the shared data is missing (the tests using it are marked
    with :func:`needs_shared` and skip before they read it)."""
    return json.loads(path.read_text()) if path.is_file() else None
