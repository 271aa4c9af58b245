"""The calibration networks' measurements, journalled as the blocks' are (:mod:`nagkit.latency.journal`).

``<out>.networks.jsonl`` beside a profile's table: a header naming the device (its identity,
precision included) and the space, then one line per measurement of a network, its pass (1, 2,
...) or its extra pass, appended, flushed and fsync'd before it counts. ``nagkit profile --resume``
reads it back (with a larger ``--time-budget`` or the same), so the calibration measures only the
networks and passes it lacks and fits on all of them (:func:`nagkit.latency.validate.measure_networks`);
a profile without ``--resume`` starts it anew. A journal of another device or space is not this
profile's: it is started anew, with a warning. A measurement is a network's, whichever calibration
drew it, so a resumed calibration of more networks keeps those it had.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nagkit.latency.journal import append_record, read_records, repair_tail
from nagkit.latency.table import stats_problem, utc_now

log = logging.getLogger(__name__)

NET_JOURNAL_FORMAT = "nagkit-network-journal"
NET_JOURNAL_SCHEMA = 1
_MATCH = ("spec", "model_format", "runtime", "threads", "precision")


def network_journal_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".networks.jsonl")


class NetworkJournal:
    """Every journalled measurement of each network (by its name): ``regular[a]`` of passes 1, 2,
    ... in order, ``extra[a]`` of its extra passes (statistics as dicts: ``LatencyStats`` fields)."""

    def __init__(self, path: Path, header: dict[str, Any], regular: dict[str, list[dict]] | None = None,
                 extra: dict[str, list[dict]] | None = None):
        self.path, self.header = path, header
        self.regular, self.extra = regular or {}, extra or {}

    @classmethod
    def create(cls, path: Path, header: Mapping[str, Any]) -> NetworkJournal:
        """A new journal (replacing one there, atomically): its header line only."""
        from nagkit.io import atomic_write_text

        head = {"type": "header", "format": NET_JOURNAL_FORMAT, "schema": NET_JOURNAL_SCHEMA, **header}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(head, sort_keys=True) + "\n")
        return cls(path, head)

    @classmethod
    def read(cls, path: Path, ident: Mapping[str, Any], space_spec: Mapping[str, Any], *,
             repair: bool = False) -> NetworkJournal | None:
        """The journal at ``path`` if it is this device's and space's; None when there is none, it
        is not a network journal, or it was made for another device or space. ``repair``: cut a
        torn last line off (else nothing is written). A record with impossible statistics is left
        out with a warning (that network is measured again)."""
        if not os.path.lexists(path):
            return None
        from nagkit.errors import ArtifactError
        from nagkit.io import input_file

        input_file(path, "calibration journal", hint="choose another --out")  # a FIFO or a folder: refused
        try:
            recs, data, good_len = read_records(path, "calibration journal")
        except ArtifactError as e:
            log.warning("%s; the calibration starts a new one", e.message)
            return None
        head = recs[0] if recs and isinstance(recs[0], dict) else {}
        theirs = head.get("device_identity") if isinstance(head.get("device_identity"), dict) else {}
        if head.get("format") != NET_JOURNAL_FORMAT or head.get("schema") != NET_JOURNAL_SCHEMA \
                or any(theirs.get(k) != ident.get(k) for k in _MATCH) or head.get("space_spec") != dict(space_spec):
            log.warning("calibration journal %s is not this profile's (another device, space or format); the "
                        "calibration starts a new one", path)
            return None
        j = cls(path, head)
        for i, r in enumerate(recs[1:], start=2):
            ok = isinstance(r, dict) and r.get("type") == "network" and isinstance(r.get("arch"), str) \
                and isinstance(r.get("stats"), dict)
            problem = stats_problem(r["stats"]) if ok else "is not a network measurement"
            if problem:
                log.warning("calibration journal %s line %d %s; that measurement is made again", path, i, problem)
                continue
            (j.extra if r.get("extra") else j.regular).setdefault(r["arch"], []).append(r["stats"])
        if repair:
            repair_tail(path, data, good_len)
        return j

    def passes(self) -> dict[str, int]:
        """Regular passes journalled, by network."""
        return {a: len(v) for a, v in self.regular.items()}

    def stats(self, arch: Any, passes: int) -> tuple[list, list]:
        """(the first ``passes`` regular passes, the extra passes) of ``arch``, as ``LatencyStats``."""
        from nagkit.devices.base import LatencyStats

        def of(d: Mapping[str, Any]) -> LatencyStats:
            kw = {k: d[k] for k in LatencyStats.__dataclass_fields__ if k in d and k != "samples_ms"}
            kw.setdefault("min_ms", d["median_ms"])  # (the other fields are checked on reading)
            return LatencyStats(**kw)

        a = str(arch)
        return [of(d) for d in self.regular.get(a, [])[:passes]], [of(d) for d in self.extra.get(a, [])]

    def append(self, arch: Any, stats, *, pass_no: int | None = None, extra: int | None = None) -> None:
        """One measurement of ``arch`` (a ``LatencyStats``): regular pass ``pass_no`` or extra pass ``extra``."""
        d = stats.to_dict()
        rec = {"type": "network", "arch": str(arch), "stats": d, "t": utc_now(),
               **({"extra": extra} if extra else {"pass": pass_no})}
        append_record(self.path, rec)
        (self.extra if extra else self.regular).setdefault(str(arch), []).append(d)


def journal_header(ident: Mapping[str, Any], space, command: str | None = None) -> dict[str, Any]:
    return {"device_identity": dict(ident), "space": space.name, "space_spec": space.to_dict(), "created": utc_now(),
            "command": command}


def open_network_journal(out: str | Path, ident: Mapping[str, Any], space, *, resume: bool,
                         command: str | None = None) -> NetworkJournal:
    """The calibration journal of the profile writing ``out``: the one there when resuming (and it is
    this profile's), else a new one."""
    path = network_journal_path(out)
    j = NetworkJournal.read(path, ident, space.to_dict(), repair=True) if resume else None
    if j is not None:
        n = sum(len(v) for v in j.regular.values()) + sum(len(v) for v in j.extra.values())
        if n:
            log.info("calibration: resuming %d network measurement(s) of %d network(s) from %s", n,
                     len(j.regular), path)
        return j
    return NetworkJournal.create(path, journal_header(ident, space, command))


def journalled_passes(out: str | Path | None, ident: Mapping[str, Any], space, archs: Sequence[Any]) -> dict[str, int]:
    """Regular passes a resumed profile writing ``out`` already has of ``archs`` (read only: the
    plan is made, and may be refused, before anything is written)."""
    if out is None:
        return {}
    j = NetworkJournal.read(network_journal_path(out), ident, space.to_dict())
    if j is None:
        return {}
    have = j.passes()
    return {str(a): have[str(a)] for a in archs if have.get(str(a))}
