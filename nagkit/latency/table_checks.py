"""Validation of a latency table as read from a file: entries' statistics, the space spec and
the calibration record, each refused with one line naming the bad value and the command that
rebuilds the table (issue 13 D4). Used by :class:`nagkit.latency.table.LatencyTable`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError, short_repr
from nagkit.latency.calibration_model import Calibration
from nagkit.space.arch import MAX_VALUE
from nagkit.space.space import SearchSpace
from nagkit.space.spec_check import SPACE_FIELDS, spec_field_problem


STAT_FIELDS = ("median_ms", "mean_ms", "std_ms", "p10_ms", "p90_ms", "n")


def space_digest(name: str, spec: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of a table's ``space`` (its name and spec)."""
    canon = json.dumps({"name": name, "spec": spec}, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()



def _rebuild_hint(path: Path | None, obj: Any) -> str:
    out = str(path) if path else "T.json"
    dev, space, res = "D", "S", None
    if isinstance(obj, dict):  # only short, plain values from the file make it into the command
        if isinstance(obj.get("device"), dict) and _plain(obj["device"].get("spec")):
            dev = obj["device"]["spec"]
        if isinstance(obj.get("space"), dict) and _plain(obj["space"].get("name")):
            space = obj["space"]["name"]
        if (isinstance(obj.get("resolutions"), list) and 0 < len(obj["resolutions"]) <= 64
                and all(isinstance(r, int) and not isinstance(r, bool) and 0 < r < MAX_VALUE
                        for r in obj["resolutions"])):
            res = ",".join(str(r) for r in obj["resolutions"])
        if isinstance(obj.get("provenance"), dict) and obj["provenance"].get("source") == "ofa-yaml":
            return f"re-import it with `nagkit lut import-ofa DIR --out {out}`"
    cmd = f"nagkit profile --device {dev} --space {space}"
    if res:
        cmd += f" --resolutions {res}"
    return f"rebuild it with `{cmd} --out {out} --resume` (the journal beside it keeps measured blocks)"


def _plain(v: Any) -> bool:
    return isinstance(v, str) and 0 < len(v) <= 200 and v.isprintable()


def _real(v: Any) -> float | None:
    """``v`` as a finite float, or None for anything else (bools, strings, nan/inf, and
    integers too large for a float, which would raise OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _finite_pos(v: Any) -> bool:
    f = _real(v)
    return f is not None and f > 0


def _num(v: Any) -> bool:
    return _real(v) is not None


def stats_problem(v: Any, stat: str = "median_ms") -> str | None:
    """What is wrong with one table entry / measured block's statistics (``median_ms``,
    ``mean_ms``, ``std_ms``, ``p10_ms``, ``p90_ms``, ``n``), or None when it is valid: ``stat``
    finite and > 0, the other latencies finite and > 0 or null, std >= 0, p10 <= p90, n >= 1.
    Values are quoted with :func:`~nagkit.errors.short_repr` (never formatted unbounded)."""
    if not isinstance(v, dict):
        return f"must be an object with {', '.join(STAT_FIELDS)}"
    missing = [f for f in STAT_FIELDS if f not in v]
    if missing:
        return f"is missing field(s) {', '.join(missing)}"
    if not _finite_pos(v[stat]):
        return f"has {stat}={short_repr(v[stat])}; latencies must be finite and > 0"
    for f in ("median_ms", "mean_ms", "p10_ms", "p90_ms"):
        if v[f] is not None and not _finite_pos(v[f]):
            return f"has {f}={short_repr(v[f])}; latencies must be finite and > 0 (or null when not recorded)"
    s = v["std_ms"]
    if s is not None and not (_num(s) and s >= 0):
        return f"has std_ms={short_repr(s)}; it must be finite and >= 0"
    if v["p10_ms"] is not None and v["p90_ms"] is not None and v["p10_ms"] > v["p90_ms"]:
        return f"has p10_ms={v['p10_ms']:.6g} > p90_ms={v['p90_ms']:.6g}"
    if not isinstance(v["n"], int) or isinstance(v["n"], bool) or v["n"] < 1:
        return f"has n={short_repr(v['n'])}; it must be a positive integer"
    return None


def _check_entry(key: str, v: Any, stat: str, src: str, path: Path | None = None,
                 obj: Any = None) -> dict[str, Any]:
    def fail(msg: str) -> ArtifactError:
        return ArtifactError(f"latency table {src!r}: entry {short_repr(key)} {msg}", hint=_rebuild_hint(path, obj))

    if not isinstance(key, str) or not key:
        raise fail("has an empty key")
    problem = stats_problem(v, stat)
    if problem:
        raise fail(problem)
    return v


# --------------------------------------------------------------------------- space.spec


def _check_space(sp: dict[str, Any], recorded: Any, src: str, path: Path | None, obj: Any) -> SearchSpace:
    """Validate ``space`` (name + spec) field by field and build the space: a bad spec must fail
    here with the field's name, not later as ZeroDivisionError or TypeError in a prediction."""
    hint = _rebuild_hint(path, obj)

    def fail(msg: str) -> ArtifactError:
        return ArtifactError(f"latency table {src!r}: space spec {msg}; it is refused", hint=hint)

    spec = sp["spec"]
    if recorded is not None:
        try:
            digest = space_digest(sp["name"], spec)
        except (ValueError, TypeError):
            raise fail("holds a value that is not plain JSON (NaN or Infinity)") from None
        if not isinstance(recorded, str) or digest != recorded:
            raise ArtifactError(f"latency table {src!r} fails its integrity check: the space's sha256 is "
                                f"{digest[:12]}…, the file records {short_repr(recorded, 20)} (edited or corrupted)",
                                hint=hint)
    if "name" not in spec:
        raise fail("has no 'name'")
    unknown = [k for k in spec if k not in SPACE_FIELDS]
    if unknown:
        raise fail(f"has unknown field(s) {short_repr(sorted(map(str, unknown)))}; valid fields: "
                   f"{', '.join(SPACE_FIELDS)}")
    if (problem := spec_field_problem(spec)) is not None:
        raise fail(problem)
    try:
        return SearchSpace.from_dict(spec)
    except BadInputError as e:
        raise fail(f"is inconsistent: {e.message}") from None


_CAL_FIELDS = ("scale", "offset", "fit_error", "n_fit", "model", "group_by", "intercept_ms", "default_scale",
               "group_scales")
#: Optional calibration details that readers format as numbers (``nagkit lut show``): finite, >= 0.
_CAL_NUMBERS = ("raw_mape", "global_linear_mape", "loo_mape", "loo_within_5pct", "shrinkage")


def _read_calibration(c: Any, src: str, path: Path | None, obj: Any) -> Calibration | None:
    """The calibration record, checked; anything ill-formed is refused (never half-applied)."""
    from nagkit.latency.keys import GROUP_SCHEMES

    if c is None:
        return None
    hint = "re-fit it with `nagkit lut calibrate --lut T --device D --samples N`"

    def fail(msg: str) -> ArtifactError:
        return ArtifactError(f"latency table {src!r}: calibration {msg}; it is refused", hint=hint)

    if not isinstance(c, dict):
        raise ArtifactError(f"latency table {src!r}: 'calibration' must be an object or null", hint=hint)
    missing = [k for k in ("scale", "offset", "fit_error", "n_fit") if k not in c]
    if missing:
        raise ArtifactError(f"latency table {src!r}: calibration is missing {', '.join(missing)}", hint=hint)
    ok = (_finite_pos(c["scale"]) and _num(c["offset"]) and _num(c["fit_error"]) and c["fit_error"] >= 0
          and isinstance(c["n_fit"], int) and not isinstance(c["n_fit"], bool) and 1 <= c["n_fit"] <= 10**9)
    if not ok:
        raise ArtifactError(f"latency table {src!r}: calibration has invalid values "
                            f"(scale={short_repr(c['scale'], 40)}, offset={short_repr(c['offset'], 40)}, "
                            f"fit_error={short_repr(c['fit_error'], 40)}, n_fit={short_repr(c['n_fit'], 40)})", hint=hint)
    model = c.get("model", "linear")  # tables written before grouped calibration have no 'model'
    if model not in ("linear", "grouped"):
        raise fail(f"has unknown model {short_repr(model)} (expected 'linear' or 'grouped')")
    grouped = {}
    if model == "grouped":
        miss = [k for k in ("group_by", "intercept_ms", "default_scale", "group_scales") if k not in c]
        if miss:
            raise fail(f"(grouped) is missing {', '.join(miss)}")
        if not isinstance(c["group_by"], str) or c["group_by"] not in GROUP_SCHEMES:
            raise fail(f"has unknown group_by {short_repr(c['group_by'])} (valid: {', '.join(GROUP_SCHEMES)})")
        if not _num(c["intercept_ms"]):
            raise fail(f"has intercept_ms={short_repr(c['intercept_ms'])}; it must be a finite number")
        if not _finite_pos(c["default_scale"]):
            raise fail(f"has default_scale={short_repr(c['default_scale'])}; it must be finite and > 0")
        gs = c["group_scales"]
        if not isinstance(gs, dict) or not gs:
            raise fail("has no group_scales (a non-empty object of group -> factor)")
        for g, v in gs.items():
            if not isinstance(g, str) or not g or not _num(v) or v < 0:
                raise fail(f"group {short_repr(g)} has factor {short_repr(v)}; factors must be finite and >= 0")
        grouped = {"group_by": c["group_by"], "group_scales": {g: float(v) for g, v in gs.items()},
                   "intercept": float(c["intercept_ms"]), "default_scale": float(c["default_scale"])}
    elif any(k in c for k in ("group_by", "group_scales", "intercept_ms")):
        raise fail("is linear but carries grouped fields (group_by/group_scales/intercept_ms)")
    # the fit data, when recorded, must be consistent (refit_calibration reads it)
    n = c["n_fit"]
    for k, check in (("fit_archs", lambda v: isinstance(v, str) and v),
                     ("fit_raw_ms", _finite_pos), ("fit_measured_ms", _finite_pos)):
        if k in c:
            v = c[k]
            if not isinstance(v, list) or len(v) != n or not all(check(x) for x in v):
                raise fail(f"field {k!r} must list {n} (n_fit) "
                           + ("arch strings" if k == "fit_archs" else "finite latencies > 0"))
    for k in _CAL_NUMBERS:
        if k in c and not (_num(c[k]) and c[k] >= 0):
            raise fail(f"field {k!r} is {short_repr(c[k])}; it must be a finite number >= 0")
    if ("loo_mape" in c) != ("loo_within_5pct" in c):
        raise fail("has only one of 'loo_mape' and 'loo_within_5pct' (a leave-one-out check records both)")
    if "loo_within_5pct" in c and c["loo_within_5pct"] > 1:
        raise fail(f"field 'loo_within_5pct' is {c['loo_within_5pct']:.6g}; it is a fraction in [0, 1]")
    if "fit_error_unit" in c and not isinstance(c["fit_error_unit"], str):
        raise fail(f"field 'fit_error_unit' is {short_repr(c['fit_error_unit'])}; it must be a string")
    details = {k: v for k, v in c.items() if k not in _CAL_FIELDS}
    return Calibration(float(c["scale"]), float(c["offset"]), float(c["fit_error"]), int(n), details, **grouped)
