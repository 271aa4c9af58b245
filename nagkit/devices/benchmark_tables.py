"""``benchmark_model``'s op-profiling tables (Run Order, Top by Computation Time, Summary by
node type...), read into rows, and the parse-miss error the whole parser shares."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nagkit.errors import short_repr

# A number as benchmark_model prints one. `\d+(?:\.\d*)?` (not `\d+\.?\d*`): the digits before
# and after an optional dot must not be able to split one run of digits in several ways, or a
# failing match backtracks (issue 13 D1). Compile with re.ASCII: '²' or '٢' are not digits.
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
NUM_RE = re.compile(NUM, re.ASCII)


class ParseMiss(Exception):
    """Internal: a parse miss; turned into ProfileParseError quoting the whole output."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass(frozen=True)
class ProfileTable:
    """One op-profiling table. Column names are normalised (``[avg ms]`` -> ``avg_ms``,
    ``[cdf%]`` -> ``cdf_pct``); numbers are floats (percent signs dropped), counts ints."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class ProfileSection:
    """A profiling block: ``Profiling Info for Benchmark Initialization`` or the regular runs."""

    name: str
    tables: tuple[ProfileTable, ...]
    nodes_executed: int | None = None
    nodes_observed: int | None = None
    timings: Any = None  # the section's count= line, a nagkit.devices.benchmark_model.RunStats

    def table(self, title: str) -> ProfileTable:
        for t in self.tables:
            if t.title == title:
                return t
        raise KeyError(f"no table {title!r}; tables: {[t.title for t in self.tables]}")


def norm_col(name: str) -> str:
    name = name.strip().strip("[]").strip().lower().replace("%", " pct")
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")


def _cell(col: str, raw: str) -> Any:
    raw = raw.strip()
    if col in ("name", "node_type"):
        return raw
    txt = raw[:-1] if raw.endswith("%") else raw
    if not NUM_RE.fullmatch(txt):
        return raw
    val = float(txt)
    if col in ("count", "times_called") and val.is_integer():
        return int(val)
    return val


def _split_row(text: str, ncols: int) -> list[str]:
    if "\t" in text:
        parts = text.split("\t")
        if parts and parts[0].strip() == "":
            parts = parts[1:]
        return parts
    return text.split(None, ncols - 1)  # retyped tables: spaces; the last column may hold spaces


class TableBuilder:
    def __init__(self, title: str):
        self.title = title
        self.columns: list[str] = []
        self.rows: list[dict[str, Any]] = []

    def accepts(self, text: str) -> bool:
        if not text.strip():
            return False
        if not self.columns:
            return "[" in text
        return text.startswith("\t") or looks_like_row(text)

    def feed(self, text: str) -> None:
        if not self.columns:
            cols = re.findall(r"\[([^\]]+)\]", text)
            if not cols:
                raise ParseMiss(f"profiling table {short_repr(self.title)} has no column header")
            self.columns = [norm_col(c) for c in cols]
            return
        parts = _split_row(text, len(self.columns))
        if len(parts) != len(self.columns):
            raise ParseMiss(f"profiling table {short_repr(self.title)}: row has {len(parts)} cells, header has "
                            f"{len(self.columns)}: {short_repr(text.strip())}")
        self.rows.append({c: _cell(c, p) for c, p in zip(self.columns, parts)})

    def build(self) -> ProfileTable:
        return ProfileTable(self.title, tuple(self.columns), tuple(self.rows))


def looks_like_row(text: str) -> bool:
    """A retyped (tab-less) table row: a node type followed by numbers."""
    parts = text.split()
    return len(parts) >= 3 and re.fullmatch(r"[A-Za-z_]\w*", parts[0], re.ASCII) is not None and re.fullmatch(
        rf"{NUM}%?", parts[1], re.ASCII) is not None
