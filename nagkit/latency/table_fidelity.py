"""What a table profiled under a time budget reached, for the commands that use it.

``nagkit profile --time-budget`` writes a ``time_budget`` record into the table's provenance
(:mod:`nagkit.latency.budget`): what was skipped for time, the held-out share within ±5%/±10%,
the noise verdict. ``nagkit build`` and ``nagkit generate`` read it here
(:func:`table_fidelity`), say what the table reached beside their result (``table_fidelity`` in
``--json``), and warn when the table was cut short or is below a usable level
(:data:`USABLE_WITHIN_10PCT`). A table without the record (shipped tables, synthetic ones,
tables from before budgets) gets None: nothing is said.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nagkit.latency.budget_text import fmt_s

# A table whose held-out networks fall within ±10% of the prediction less often than this is below
# a usable level: a budget's prediction is then off by more than 10% for more than one network in
# five (the target is ±5% for 95%: decisions 19; the default command on the noisy 2-core EPYC
# reached 17-79% within ±10% in 10 minutes: benchmarks/latency/README.md).
USABLE_WITHIN_10PCT = 0.8


def _noisy(provenance: Mapping[str, Any]) -> dict[str, bool | None]:
    """Whether the profile found the blocks, and the calibration networks, too noisy for ±5%."""
    from nagkit.latency.calibration import NOISE_LIMIT_PCT, UNCONFIRMED_LIMIT, block_noise_warning

    bp = provenance.get("block_passes")
    blocks = block_noise_warning(bp if isinstance(bp, Mapping) else None) is not None
    fid = provenance.get("fidelity")
    v = fid.get("verdict") if isinstance(fid, Mapping) else None
    nets = None
    if isinstance(v, Mapping):
        sd, share = v.get("statistic_sd_pct"), v.get("unconfirmed_share")
        nets = bool((isinstance(sd, (int, float)) and sd > NOISE_LIMIT_PCT)
                    or (isinstance(share, (int, float)) and share > UNCONFIRMED_LIMIT))
    return {"blocks": blocks, "networks": nets}


def _share(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def table_fidelity(provenance: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The fidelity a table's profile reached under its time budget, and the warnings a command
    that uses the table gives; None for a table whose provenance has no ``time_budget`` record.

    ``level``: ``meets ±5%`` (held out: 95% within ±5%, the machine not too noisy), ``usable``
    (at least :data:`USABLE_WITHIN_10PCT` within ±10%), ``below usable``, or ``unknown`` (no
    calibration ran, so nothing was held out). ``cut_short``: work was skipped for time."""
    rec = (provenance or {}).get("time_budget")
    if not isinstance(rec, Mapping):
        return None
    fid = rec.get("fidelity") if isinstance(rec.get("fidelity"), Mapping) else {}
    w5, w10 = _share(fid.get("within_5pct")), _share(fid.get("within_10pct"))
    skipped = [dict(m) for m in rec.get("skipped_for_time") or [] if isinstance(m, Mapping)]
    noisy = _noisy(provenance)
    too_noisy = bool(noisy["blocks"] or noisy["networks"])
    if w5 is None:
        level = "unknown"
    elif w5 >= 0.95 and not too_noisy:
        level = "meets ±5%"
    elif w10 is not None and w10 >= USABLE_WITHIN_10PCT:
        level = "usable"
    else:
        level = "below usable"
    budget = _share(rec.get("time_budget_s"))
    out = {"time_budget_s": budget, "elapsed_s": _share(rec.get("elapsed_s")),
           "over_budget": bool(rec.get("over_budget")),
           "cut_short": bool(skipped), "skipped_for_time": skipped, "held_out": fid.get("held_out"),
           "within_5pct": w5, "within_10pct": w10, "adopted": fid.get("adopted"), "level": level,
           "usable_within_10pct": USABLE_WITHIN_10PCT, "too_noisy": noisy,
           "noise_verdict": dict(rec.get("noise_verdict") or {}), "resume_with": rec.get("resume_with"),
           "more_time": rec.get("more_time"), "command": (provenance or {}).get("command")}
    out["warnings"] = _warnings(out)
    return out


def _warnings(tf: Mapping[str, Any]) -> list[str]:
    out = []
    if tf["cut_short"]:
        what = ", ".join(f"{m.get('phase')} ({m.get('items')})" for m in tf["skipped_for_time"])
        again = (f"its profile rerun with {tf['resume_with']} would add them" if tf.get("resume_with")
                 else tf.get("more_time") or "rerun its profile with --resume and a larger --time-budget")
        cal = "; the calibration itself was left out" if tf["within_5pct"] is None and any(
            "network" in str(m.get("phase")) for m in tf["skipped_for_time"]) else ""
        out.append(f"the latency table was cut short by its profile's time budget of "
                   f"{fmt_s(tf['time_budget_s'] or 0)}: left out for time: {what}{cal}; {again}")
    if tf["level"] == "below usable":
        w10 = "" if tf["within_10pct"] is None else f"{tf['within_10pct']:.0%} of held-out networks within ±10% " \
                                                    f"(usable: {USABLE_WITHIN_10PCT:.0%}), "
        out.append(f"the latency table's fidelity is below a usable level: {w10}{tf['within_5pct']:.0%} within ±5%; "
                   "its predictions may be far off: check it with `nagkit lut validate` (or measure with --device)")
    if tf["too_noisy"]["blocks"] or tf["too_noisy"]["networks"]:
        which = " and ".join(k for k in ("blocks", "networks") if tf["too_noisy"][k])
        out.append(f"the latency table's profile found this machine too noisy for ±5% ({which}): "
                   "its held-out figures are uncertain; profile again on a quiet machine")
    return out


def fidelity_line(tf: Mapping[str, Any] | None) -> str | None:
    """One line for people: what the table reached and how its profile went; None without a record."""
    if not tf:
        return None
    if tf["within_5pct"] is not None:
        w10 = "" if tf["within_10pct"] is None else f", {tf['within_10pct']:.0%} within ±10%"
        head = f"held out {tf['within_5pct']:.0%} within ±5%{w10} ({tf['level']})"
    else:
        head = "no held-out fidelity (no calibration ran)"
    b = tf["time_budget_s"]
    how = (f"profiled in {fmt_s(tf['elapsed_s'] or 0)} of a {fmt_s(b)} time budget" if b else
           f"profiled in {fmt_s(tf['elapsed_s'] or 0)}, no time budget")
    state = "cut short" if tf["cut_short"] else "nothing left out for time"
    return f"{head}; {how}, {state}" + (", over budget" if tf["over_budget"] else "")
