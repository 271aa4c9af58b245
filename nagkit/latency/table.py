"""The latency lookup table: schema, strict loading, atomic saving and arch prediction.

A table maps block keys (:mod:`nagkit.latency.keys`) to latency statistics measured on one
device with one runtime. An architecture's latency is the sum over its layers of the table's
``stat`` (``median_ms`` for tables profiled by nagkit, ``mean_ms`` for OFA imports), optionally
corrected by a calibration fitted on measured whole networks.

File format (JSON)::

    {"format": "nagkit-latency-table", "schema": 1, "device": {...}, "runtime": {...},
     "space": {"name": ..., "spec": {SearchSpace.to_dict()}}, "resolutions": [224, ...],
     "created": "2026-...Z", "stat": "median_ms", "precision": "fp32" | "int8" | "fp16",
     "entries": {key: {"median_ms", "mean_ms", "std_ms", "p10_ms", "p90_ms", "n"}},
     "entries_sha256": "...", "calibration": null | {...}, "provenance": {...}}

``precision`` is what the blocks were measured as: ``int8`` tables (``nagkit profile --precision
int8``) time every block quantized, and predict int8 bundles only; ``fp16`` tables time every
block with float16 weights (decisions 27); tables written before precisions existed have none
and are fp32.

``entries_sha256`` is a sha256 over the canonical JSON of ``entries``; :meth:`LatencyTable.load`
recomputes and checks it. ``space_sha256`` does the same for ``space`` (name and spec); tables
written before it existed have none and still load. Either way every field of ``space.spec`` is
type- and range-checked on load (a stride of 0 or a width given as a string would otherwise
only fail deep inside a prediction), and the file is capped at :data:`MAX_TABLE_BYTES`.

The calibration record always has ``scale``, ``offset``, ``fit_error`` (MAPE % of the
calibrated prediction on the networks it was fitted on) and ``n_fit``, and a ``model``:

* ``"linear"`` (or no ``model``: tables written before grouped calibration):
  ``calibrated = scale * sum + offset``;
* ``"grouped"`` (:mod:`nagkit.latency.calibration`, what ``nagkit lut calibrate`` fits):
  ``calibrated = intercept_ms + Σ_g group_scales[g] * (sum of the arch's blocks in group g)``
  with ``group_by`` the scheme of :func:`nagkit.latency.keys.block_group` (``kind``,
  ``kind-in``, ``kind-in-k``) and ``default_scale`` the factor of a group the fit never saw;
  ``scale``/``offset`` then hold the global linear fit of the same networks.

Optional fit data: ``fit_archs``, ``fit_raw_ms``, ``fit_measured_ms`` (``n_fit`` each), which
:func:`nagkit.latency.calibration.refit_calibration` refits from offline. Loading refuses a
record with a missing or ill-formed field (non-finite or negative factors, an unknown model or
scheme, fit data of the wrong length) instead of half-applying it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError, short_repr
from nagkit.io import atomic_write_json
from nagkit.latency.calibration_model import Calibration, check_positive
from nagkit.latency.keys import block_key, scoped
# STAT_FIELDS, space_digest and stats_problem are also nagkit.latency.table's public names
from nagkit.runtimes.convert import PRECISIONS, check_precision_name
from nagkit.latency.table_checks import (STAT_FIELDS, _check_entry, _check_space, _read_calibration, _rebuild_hint,  # noqa: F401
                                         space_digest, stats_problem)
from nagkit.space.arch import MAX_VALUE, Arch
from nagkit.space.space import SearchSpace

FORMAT = "nagkit-latency-table"
SCHEMA_VERSION = 1
PREDICT_STATS = ("median_ms", "mean_ms")
_REQUIRED = ("format", "schema", "device", "runtime", "space", "resolutions", "created", "stat",
             "entries", "entries_sha256", "calibration", "provenance")
#: The largest table file nagkit reads (the shipped ones are under 400 KB).
MAX_TABLE_BYTES = 256 << 20


class MissingBlockError(BadInputError):
    """An architecture needs a block the table has no entry for."""


def entries_digest(entries: Mapping[str, Mapping[str, Any]]) -> str:
    canon = json.dumps(entries, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class LatencyTable:
    device: dict[str, Any]
    runtime: dict[str, Any]
    space_name: str
    space_spec: dict[str, Any]
    resolutions: tuple[int, ...]
    entries: dict[str, dict[str, Any]]
    stat: str = "median_ms"
    created: str = field(default_factory=utc_now)
    calibration: Calibration | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    precision: str = "fp32"
    path: Path | None = field(default=None, compare=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.stat not in PREDICT_STATS:
            raise BadInputError(f"table stat {self.stat!r} is not one of {', '.join(PREDICT_STATS)}")
        check_precision_name(self.precision)
        object.__setattr__(self, "resolutions", tuple(int(r) for r in self.resolutions))

    # -- construction --------------------------------------------------------------------
    @classmethod
    def create(cls, space: SearchSpace, entries: Mapping[str, Mapping[str, Any]], *,
               device: Mapping[str, Any], runtime: Mapping[str, Any], resolutions: Iterable[int],
               stat: str = "median_ms", provenance: Mapping[str, Any] | None = None,
               calibration: Calibration | None = None, precision: str = "fp32") -> LatencyTable:
        ents = {k: _check_entry(k, dict(v), stat, "<new table>") for k, v in entries.items()}
        return cls(device=dict(device), runtime=dict(runtime), space_name=space.name,
                   space_spec=space.to_dict(), resolutions=tuple(sorted(set(resolutions))),
                   entries=dict(sorted(ents.items())), stat=stat, calibration=calibration,
                   provenance=dict(provenance or {}), precision=precision)

    def with_calibration(self, calibration: Calibration | None) -> LatencyTable:
        return replace(self, calibration=calibration, _cache={})

    def space(self) -> SearchSpace:
        return SearchSpace.from_dict(self.space_spec)

    # -- I/O -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "schema": SCHEMA_VERSION,
            "device": self.device,
            "runtime": self.runtime,
            "space": {"name": self.space_name, "spec": self.space_spec},
            "resolutions": list(self.resolutions),
            "created": self.created,
            "stat": self.stat,
            "precision": self.precision,
            "entries": self.entries,
            "entries_sha256": entries_digest(self.entries),
            "space_sha256": space_digest(self.space_name, self.space_spec),
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "provenance": self.provenance,
        }

    def save(self, path: str | Path) -> Path:
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LatencyTable:
        from nagkit.io import read_input_file

        path = Path(path)
        raw = read_input_file(path, "latency table", max_bytes=MAX_TABLE_BYTES, error=ArtifactError,
                              hint="profile one with `nagkit profile --device D --space S --out T.json` "
                                   "or import OFA's with `nagkit lut import-ofa DIR --out T.json`")
        return cls.from_bytes(raw, path=path)

    @classmethod
    def from_bytes(cls, raw: bytes, path: Path | None = None) -> LatencyTable:
        """The table in ``raw`` (a table file's bytes), checked as :meth:`load` checks a file."""
        src = str(path) if path else "<table>"
        if len(raw) > MAX_TABLE_BYTES:
            raise ArtifactError(f"latency table {src!r} is over {MAX_TABLE_BYTES:,} bytes; it is refused",
                                hint=_rebuild_hint(path, None))
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            where = f" at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
            raise ArtifactError(
                f"latency table {src!r} is truncated or corrupt (not valid JSON{where}, "
                f"{len(raw)} bytes); it is refused", hint=_rebuild_hint(path, None)) from None
        except ValueError as e:  # e.g. an integer of over 4,300 digits
            raise ArtifactError(f"latency table {src!r} holds an unreadable value ({str(e).split(';')[0][:100]}); "
                                "it is refused", hint=_rebuild_hint(path, None)) from None
        except RecursionError:
            raise ArtifactError(f"latency table {src!r} is nested too deeply to be a latency table; it is refused",
                                hint=_rebuild_hint(path, None)) from None
        return cls.from_dict(obj, path=path)

    @classmethod
    def from_dict(cls, obj: Any, path: Path | None = None) -> LatencyTable:
        src = str(path) if path else "<table>"
        if not isinstance(obj, dict):
            raise ArtifactError(f"latency table {src!r} must be a JSON object, got {type(obj).__name__}",
                                hint=_rebuild_hint(path, None))
        if obj.get("format") != FORMAT:
            raise ArtifactError(f"{src!r} is not a nagkit latency table (format {short_repr(obj.get('format'))}, "
                                f"expected {FORMAT!r})",
                                hint="OFA YAML tables are imported with `nagkit lut import-ofa DIR --out T.json`")
        if obj.get("schema") != SCHEMA_VERSION:
            raise ArtifactError(f"latency table {src!r} has schema version {short_repr(obj.get('schema'))}; this "
                                f"nagkit reads schema {SCHEMA_VERSION}", hint=_rebuild_hint(path, obj))
        missing = [k for k in _REQUIRED if k not in obj]
        if missing:
            raise ArtifactError(f"latency table {src!r} is missing field(s) {', '.join(missing)}",
                                hint=_rebuild_hint(path, obj))
        for name, typ in (("device", dict), ("runtime", dict), ("space", dict), ("resolutions", list),
                          ("entries", dict), ("provenance", dict), ("created", str), ("stat", str),
                          ("entries_sha256", str)):
            if not isinstance(obj[name], typ):
                raise ArtifactError(f"latency table {src!r}: field {name!r} must be a {typ.__name__}, "
                                    f"got {type(obj[name]).__name__}", hint=_rebuild_hint(path, obj))
        if len(obj["created"]) > 64:
            raise ArtifactError(f"latency table {src!r}: 'created' is {short_repr(obj['created'])}; it must be a "
                                "timestamp such as 2026-01-31T12:00:00Z", hint=_rebuild_hint(path, obj))
        sp = obj["space"]
        if not isinstance(sp.get("name"), str) or not isinstance(sp.get("spec"), dict):
            raise ArtifactError(f"latency table {src!r}: field 'space' needs 'name' and 'spec'",
                                hint=_rebuild_hint(path, obj))
        _check_space(sp, obj.get("space_sha256"), src, path, obj)
        if obj["stat"] not in PREDICT_STATS:
            raise ArtifactError(f"latency table {src!r}: stat {short_repr(obj['stat'])} is not one of "
                                f"{', '.join(PREDICT_STATS)}", hint=_rebuild_hint(path, obj))
        res = obj["resolutions"]
        if not res or not all(isinstance(r, int) and not isinstance(r, bool) and 0 < r < MAX_VALUE for r in res):
            raise ArtifactError(f"latency table {src!r}: 'resolutions' must be a non-empty list of "
                                f"positive integers below {MAX_VALUE:,}, got {short_repr(res)}",
                                hint=_rebuild_hint(path, obj))
        entries = obj["entries"]
        if not entries:
            raise ArtifactError(f"latency table {src!r} has no entries", hint=_rebuild_hint(path, obj))
        for k, v in entries.items():
            _check_entry(k, v, obj["stat"], src, path, obj)
        try:
            digest = entries_digest(entries)
        except ValueError:  # NaN/inf slipped through
            raise ArtifactError(f"latency table {src!r} has non-finite latencies",
                                hint=_rebuild_hint(path, obj)) from None
        if digest != obj["entries_sha256"]:
            raise ArtifactError(
                f"latency table {src!r} fails its integrity check: the entries' sha256 is "
                f"{digest[:12]}…, the file records {obj['entries_sha256'][:12]}… (edited or corrupted)",
                hint=_rebuild_hint(path, obj))
        precision = obj.get("precision", "fp32")  # tables from before precisions are fp32
        if precision not in PRECISIONS:
            raise ArtifactError(f"latency table {src!r}: precision {short_repr(precision)} is not one of "
                                f"{', '.join(PRECISIONS)}", hint=_rebuild_hint(path, obj))
        cal = _read_calibration(obj["calibration"], src, path, obj)
        table = cls(precision=precision, device=obj["device"], runtime=obj["runtime"], space_name=sp["name"],
                    space_spec=sp["spec"], resolutions=tuple(res), entries=entries, stat=obj["stat"],
                    created=obj["created"], calibration=cal, provenance=obj["provenance"], path=path)
        if cal is not None:  # issue 12: no table predicts a latency <= 0
            check_positive(table, src)
        return table

    # -- lookup --------------------------------------------------------------------------
    def lookup(self, key: str, r: int | None = None) -> dict[str, Any] | None:
        """The entry of ``key`` (the resolution-scoped one first), or None."""
        if r is not None:
            e = self.entries.get(scoped(key, r))
            if e is not None:
                return e
        return self.entries.get(key)

    def block_ms(self, key: str, r: int | None = None) -> float:
        e = self.lookup(key, r)
        if e is None:
            raise self._missing(key, r)
        return float(e[self.stat])

    def _missing(self, key: str, r: int | None, arch: Arch | None = None) -> MissingBlockError:
        where = f" (needed by arch {arch})" if arch is not None else ""
        dev = self.device.get("spec") or "D"
        res = r if r is not None else ",".join(map(str, self.resolutions))
        out = str(self.path) if self.path else "T.json"
        return MissingBlockError(
            f"latency table{f' {str(self.path)!r}' if self.path else ''} has no entry for block "
            f"{key!r}{f' at r={r}' if r is not None else ''}{where}",
            hint=f"profile it with `nagkit profile --device {dev} --space {self.space_name} "
                 f"--resolutions {res} --out {out} --resume`")

    # -- prediction ----------------------------------------------------------------------
    def predict(self, space: SearchSpace, arch: Arch | str | Mapping, calibrated: bool = True) -> float:
        """Predicted latency (ms) of one arch: the sum of its layers' entries, calibrated when
        ``calibrated`` and the table has a calibration."""
        arch = space.parse_arch(arch)
        cal = self.calibration if calibrated else None
        total = 0.0 if cal is None else cal.base_ms
        for layer in space.layers(arch):
            key = block_key(layer)
            e = self.lookup(key, arch.r)
            if e is None:
                raise self._missing(key, arch.r, arch)
            total += float(e[self.stat]) if cal is None else cal.block_factor(key) * float(e[self.stat])
        if not math.isfinite(total):
            raise self._overflow(arch)
        return float(total)

    def _overflow(self, what: Any) -> ArtifactError:
        """A sum of finite entries (or calibration factors) that overflowed: no real table does that."""
        return ArtifactError(f"latency table{f' {str(self.path)!r}' if self.path else ''} predicts a latency too "
                             f"large to represent for {short_repr(str(what), 80)} (its entries or calibration "
                             "factors are far too large to be measurements)",
                             hint="re-profile the device: `nagkit profile --device D`")

    def breakdown(self, space: SearchSpace, arch: Arch) -> list[tuple[str, float]]:
        """(key, ms) per layer, in network order."""
        arch = space.parse_arch(arch)
        return [(k, self.block_ms(k, arch.r)) for k in (block_key(l) for l in space.layers(arch))]

    def _arrays(self, space: SearchSpace, r: int) -> tuple[float, np.ndarray]:
        """(fixed ms, slot ms [n_slots, n_k, n_e]) for one resolution, raw block latencies;
        NaN marks a missing key."""
        return self.slot_arrays(space, r, calibrated=False)

    def slot_arrays(self, space: SearchSpace, r: int, calibrated: bool = True) -> tuple[float, np.ndarray]:
        """(fixed ms, slot ms [n_slots, n_k, n_e]) for one resolution: an arch's prediction is
        ``fixed + sum of its active slots``. With ``calibrated`` (and a calibration) every block
        is scaled by its calibration factor and ``fixed`` includes the per-network term, so the
        sum is the calibrated prediction. NaN marks a missing key."""
        cal = self.calibration if calibrated else None
        ck = (space, r, cal is not None)
        hit = self._cache.get(ck)
        if hit is not None:
            return hit
        md = space.max_depth
        slots = np.full((space.n_block_slots, len(space.ks_list), len(space.expand_list)), np.nan)
        fixed = math.nan
        for ki, k in enumerate(space.ks_list):
            for ei, e in enumerate(space.expand_list):
                arch = Arch(r, tuple(((k, e),) * md for _ in range(space.n_stages)))
                layers = space.layers(arch)
                vals = []
                for layer in layers:
                    key = block_key(layer)
                    ent = self.lookup(key, r)
                    v = float(ent[self.stat]) if ent is not None else math.nan
                    vals.append(v if cal is None else cal.block_factor(key) * v)
                n_fixed_head = 2
                slots[:, ki, ei] = vals[n_fixed_head:n_fixed_head + space.n_block_slots]
                fixed = sum(vals[:n_fixed_head]) + sum(vals[n_fixed_head + space.n_block_slots:])
        if cal is not None:
            fixed += cal.base_ms
        self._cache[ck] = (fixed, slots)
        return fixed, slots

    def predict_many(self, space: SearchSpace, archs: Sequence[Arch | str | Mapping],
                     calibrated: bool = True) -> np.ndarray:
        """Predicted latency (ms) of many archs at once (vectorised lookups)."""
        archs = [a if isinstance(a, Arch) else space.parse_arch(a) for a in archs]
        n = len(archs)
        if n == 0:
            return np.zeros(0)
        md, ns = space.max_depth, space.n_stages
        kidx = {k: i for i, k in enumerate(space.ks_list)}
        eidx = {e: i for i, e in enumerate(space.expand_list)}
        r_arr = np.empty(n, dtype=np.int64)
        kk = np.zeros((n, ns * md), dtype=np.int64)
        ee = np.zeros((n, ns * md), dtype=np.int64)
        act = np.zeros((n, ns * md), dtype=bool)
        for i, a in enumerate(archs):
            r_arr[i] = a.r
            if len(a.stages) != ns:
                space.validate(a)
            for si, st in enumerate(a.stages):
                if len(st) > md:
                    space.validate(a)
                base = si * md
                for bi, (k, e) in enumerate(st):
                    try:
                        kk[i, base + bi] = kidx[k]
                        ee[i, base + bi] = eidx[e]
                    except KeyError:
                        space.validate(a)
                    act[i, base + bi] = True
        out = np.empty(n, dtype=np.float64)
        slot_ix = np.arange(ns * md)[None, :]
        for r in np.unique(r_arr):
            sel = np.nonzero(r_arr == r)[0]
            if int(r) not in space.resolutions:
                space.validate(archs[int(sel[0])])
            fixed, slots = self.slot_arrays(space, int(r), calibrated=calibrated)
            per = slots[slot_ix, kk[sel], ee[sel]]
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
                out[sel] = fixed + np.where(act[sel], per, 0.0).sum(axis=1)
        bad = np.nonzero(~np.isfinite(out))[0]
        if bad.size:
            self.predict(space, archs[int(bad[0])], calibrated=False)  # raises naming the key
            raise self._overflow(archs[int(bad[0])])
        return out

    def latency_range(self, space: SearchSpace, calibrated: bool = True) -> tuple[float, float]:
        """(fastest, slowest) predicted latency over every arch of ``space``."""
        lo, hi = math.inf, -math.inf
        md = space.max_depth
        for r in space.resolutions:
            fixed, slots = self.slot_arrays(space, r, calibrated=calibrated)
            if not np.isfinite(fixed) or not np.all(np.isfinite(slots)):
                missing = self.missing_keys(space, [r])
                raise self._missing(missing[0], r) if missing else self._overflow(f"{space.name} at r={r}")
            smin = slots.reshape(slots.shape[0], -1).min(axis=1)
            smax = slots.reshape(slots.shape[0], -1).max(axis=1)
            rlo, rhi = fixed, fixed
            for s in range(space.n_stages):
                cmin = np.cumsum(smin[s * md:(s + 1) * md])
                cmax = np.cumsum(smax[s * md:(s + 1) * md])
                rlo += min(cmin[d - 1] for d in space.depth_list)
                rhi += max(cmax[d - 1] for d in space.depth_list)
            lo, hi = min(lo, rlo), max(hi, rhi)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise self._overflow(f"the slowest arch of {space.name}")
        return float(lo), float(hi)

    def missing_keys(self, space: SearchSpace, resolutions: Iterable[int] | None = None) -> list[str]:
        """Keys the space needs (at ``resolutions``) that the table lacks, sorted."""
        from nagkit.latency.blocks import unique_layers

        res = list(resolutions) if resolutions is not None else list(space.resolutions)
        miss = set()
        for r in res:
            for key in unique_layers(space, [r]):
                if self.lookup(key, r) is None:
                    miss.add(key)
        return sorted(miss)

    def summary(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
            "space": self.space_name,
            "device": self.device,
            "runtime": self.runtime,
            "resolutions": list(self.resolutions),
            "created": self.created,
            "stat": self.stat,
            "precision": self.precision,
            "n_entries": len(self.entries),
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "provenance": self.provenance,
        }
