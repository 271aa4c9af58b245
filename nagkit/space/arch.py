"""The ``Arch`` value type: one architecture of an OFA-MobileNetV3-style space.

The canonical string is the identity of an architecture everywhere in nagkit (dataset rows,
generator vocabulary, bundle manifests). It lists the resolution, then each stage's *active*
blocks as ``k<kernel>e<expand>`` joined by ``.``; stages are joined by ``-``::

    r224-k3e4.k5e6-k7e3.k3e3.k5e4-k3e6.k3e3-k5e4.k7e6.k3e3.k3e3-k5e6.k3e4

The depth of a stage is the number of its blocks. The string is shell- and filename-safe.
It round-trips with OFA's dict ``{"ks": [20], "e": [20], "d": [5], "r": 224}``; entries of an
OFA dict beyond a stage's depth are ignored, as in OFA.

Parsing is strict and bounded, since arch strings come from users, files and the network:
ASCII digits only (not ``r٢٢٤``), at most 6 digits per number, no whitespace inside, and
messages quote at most ~80 characters of the input. Every failure is an :class:`ArchError`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagkit.errors import ArchError, short_repr

#: Every number in an arch (resolution, kernel, expand ratio, depth) is below this.
MAX_VALUE = 1_000_000
#: The most an ``@FILE`` arch argument may hold (an arch is well under 1 KB).
MAX_ARCH_FILE_BYTES = 1 << 20
_RES_RE = re.compile(r"r([0-9]+)")
_BLOCK_RE = re.compile(r"k([0-9]+)e([0-9]+)")
_EXAMPLE = "'r224-k3e4.k5e6-k7e3.k3e3-...'"


@dataclass(frozen=True, order=True)
class Arch:
    """An architecture: resolution plus, per stage, the active blocks' (kernel, expand)."""

    r: int
    stages: tuple[tuple[tuple[int, int], ...], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.r, int) or isinstance(self.r, bool) or not 0 < self.r < MAX_VALUE:
            raise ArchError(f"arch field 'r' must be a positive integer resolution below {MAX_VALUE:,}, "
                            f"got {short_repr(self.r)}")
        stages = tuple(tuple((int(k), int(e)) for k, e in st) for st in self.stages)
        object.__setattr__(self, "stages", stages)
        for i, st in enumerate(stages):
            if len(st) == 0:
                raise ArchError(f"arch stage {i} has depth 0; every stage needs at least one block")

    # -- derived views -------------------------------------------------------------------
    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(len(s) for s in self.stages)

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """All active (kernel, expand) pairs in order."""
        return tuple(b for st in self.stages for b in st)

    @property
    def n_blocks(self) -> int:
        return sum(self.depths)

    # -- string form ---------------------------------------------------------------------
    def __str__(self) -> str:
        return self.to_string()

    def to_string(self) -> str:
        parts = [f"r{self.r}"]
        for st in self.stages:
            parts.append(".".join(f"k{k}e{e}" for k, e in st))
        return "-".join(parts)

    @classmethod
    def from_string(cls, text: str) -> Arch:
        text = text.strip()
        parts = text.split("-")
        m = _RES_RE.fullmatch(parts[0])
        if not m:
            raise ArchError(f"malformed arch string {short_repr(text)}: it must start with the resolution "
                            f"'r<int>' (ASCII digits), e.g. {_EXAMPLE}")
        r = _bounded(m.group(1), "the resolution", text)
        if len(parts) < 2:
            raise ArchError(f"malformed arch string {short_repr(text)}: no stages after the resolution")
        stages = []
        for si, p in enumerate(parts[1:]):
            blocks = []
            for bi, tok in enumerate(p.split(".")):
                m = _BLOCK_RE.fullmatch(tok)
                if not m:
                    raise ArchError(
                        f"malformed arch string {short_repr(text)}: stage {si} block {bi} is {short_repr(tok, 40)}, "
                        "expected 'k<kernel>e<expand>' such as 'k5e4' (ASCII digits, no spaces)"
                    )
                where = f"stage {si} block {bi}"
                blocks.append((_bounded(m.group(1), f"the kernel of {where}", text),
                               _bounded(m.group(2), f"the expand ratio of {where}", text)))
            stages.append(tuple(blocks))
        return cls(r, tuple(stages))

    # -- OFA dict form -------------------------------------------------------------------
    def to_ofa_dict(self, max_depth: int | Sequence[int] = 4) -> dict[str, Any]:
        """OFA's ``{"ks", "e", "d", "r"}``. Slots beyond a stage's depth repeat its last block
        (OFA ignores them)."""
        mds = [max_depth] * len(self.stages) if isinstance(max_depth, int) else list(max_depth)
        ks: list[int] = []
        es: list[int] = []
        for st, md in zip(self.stages, mds):
            if len(st) > md:
                raise ArchError(f"stage depth {len(st)} exceeds max_depth {md}")
            for i in range(md):
                k, e = st[min(i, len(st) - 1)]
                ks.append(k)
                es.append(e)
        return {"ks": ks, "e": es, "d": list(self.depths), "r": self.r}

    @classmethod
    def from_ofa_dict(cls, d: Mapping[str, Any], max_depth: int | Sequence[int] | None = None,
                      default_r: int | None = None) -> Arch:
        """Parse OFA's dict. ``r`` may be an int, a one-element list, or ``image_size``."""
        if not isinstance(d, Mapping):
            raise ArchError(f"an OFA arch must be a JSON object with ks, e, d and r; got {type(d).__name__}")
        missing = [k for k in ("ks", "e", "d") if k not in d]
        if missing:
            raise ArchError(
                f"OFA arch dict is missing field(s) {', '.join(missing)}; expected "
                '{"ks": [..], "e": [..], "d": [..], "r": 224}'
            )
        r = d.get("r", d.get("image_size", d.get("resolution", default_r)))
        if isinstance(r, (list, tuple)):
            if len(r) != 1:
                raise ArchError(f"arch field 'r' must be one resolution, got {short_repr(r)}")
            r = r[0]
        if r is None:
            raise ArchError('OFA arch dict has no resolution: add "r": <int> (or "image_size")')
        if not isinstance(r, int) or isinstance(r, bool):
            raise ArchError(f"arch field 'r' must be an integer, got {short_repr(r)}")
        ks, es, ds = d["ks"], d["e"], d["d"]
        for name, v in (("ks", ks), ("e", es), ("d", ds)):
            if not isinstance(v, (list, tuple)) or not all(
                isinstance(x, int) and not isinstance(x, bool) and -MAX_VALUE < x < MAX_VALUE for x in v
            ):
                raise ArchError(f"arch field {name!r} must be a list of integers (each below {MAX_VALUE:,}), "
                                f"got {short_repr(v)}")
        n_stages = len(ds)
        if n_stages == 0:
            raise ArchError("arch field 'd' is empty; expected one depth per stage")
        if max_depth is None:
            if len(ks) % n_stages:
                raise ArchError(
                    f"arch field 'ks' has {len(ks)} entries, not a multiple of the {n_stages} stages in 'd'"
                )
            mds = [len(ks) // n_stages] * n_stages
        else:
            mds = [max_depth] * n_stages if isinstance(max_depth, int) else list(max_depth)
        total = sum(mds)
        for name, v in (("ks", ks), ("e", es)):
            if len(v) != total:
                raise ArchError(
                    f"arch field {name!r} has {len(v)} entries; expected {total} "
                    f"(one per block slot: {n_stages} stages x {mds[0]})"
                )
        stages = []
        off = 0
        for si, (dep, md) in enumerate(zip(ds, mds)):
            if not 1 <= dep <= md:
                raise ArchError(f"arch field 'd' stage {si} is {dep}; allowed depths are 1..{md}")
            stages.append(tuple((ks[off + i], es[off + i]) for i in range(dep)))
            off += md
        return cls(r, tuple(stages))

    # -- generic parsing -----------------------------------------------------------------
    @classmethod
    def parse(cls, value: Any, max_depth: int | Sequence[int] | None = None) -> Arch:
        """Accept an ``Arch``, a canonical string, a JSON string of OFA's dict, or a dict."""
        if isinstance(value, Arch):
            return value
        if isinstance(value, Mapping):
            return cls.from_ofa_dict(value, max_depth=max_depth)
        if isinstance(value, str):
            s = value.strip()
            if s.startswith("{"):
                return cls.from_ofa_dict(_loads_json(s), max_depth=max_depth)
            return cls.from_string(s)
        raise ArchError(f"cannot read an arch from {type(value).__name__}: {short_repr(value)}")


def _bounded(digits: str, what: str, text: str) -> int:
    """An ASCII digit string as an int below MAX_VALUE (never int() of 4,300+ digits)."""
    if len(digits) > len(str(MAX_VALUE - 1)) or int(digits) >= MAX_VALUE:
        raise ArchError(f"malformed arch string {short_repr(text)}: {what} has {len(digits):,} digits; "
                        f"numbers in an arch are below {MAX_VALUE:,}")
    return int(digits)


def _loads_json(s: str) -> Any:
    """OFA's dict from JSON text; any failure (syntax, a 4,300+ digit number, nesting deeper
    than Python's recursion limit) is an ArchError."""
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        raise ArchError(f"arch looks like JSON but does not parse: {e.msg} at column {e.colno}") from None
    except ValueError as e:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise ArchError(f"arch looks like JSON but holds an unreadable value: {str(e).split(';')[0][:120]}") from None
    except RecursionError:
        raise ArchError("arch looks like JSON but is nested too deeply to be an OFA arch dict") from None


def read_arch_arg(text: str) -> str:
    """``@FILE`` reads the arch from FILE (UTF-8 text, at most :data:`MAX_ARCH_FILE_BYTES`);
    anything else is returned as is."""
    if not text.startswith("@"):
        return text
    from nagkit.io import read_input_file

    p = Path(text[1:])
    name = short_repr(os.fspath(p))
    data = read_input_file(p, "arch file", max_bytes=MAX_ARCH_FILE_BYTES, error=ArchError,
                           hint="it should hold one arch (a canonical string or OFA's dict as JSON)")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        raise ArchError(f"arch file {name} is not UTF-8 text (byte 0x{data[e.start]:02x} at position "
                        f"{e.start})") from None
