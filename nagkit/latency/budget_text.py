"""The time budget as people write it and read it: ``--time-budget 10m`` parsed, durations
shown, and a table's ``time_budget`` record (:mod:`nagkit.latency.budget`) in a few lines."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from nagkit.errors import BadInputError, short_repr

MAX_BUDGET_S = 7 * 24 * 3600.0  # a week: beyond it a budget is a typo
FORMS = "seconds (600, 90.5) or hours/minutes/seconds (10m, 90s, 1h, 1h30m)"


def parse_time_budget(value: Any) -> float | None:
    """Seconds of a ``--time-budget``: a number of seconds (``600``, ``90.5``) or ``1h30m``-style
    text (h, m, s in that order, each at most once); ``"none"``: no budget (None). Refuses
    anything else, zero, negative, non-finite and over :data:`MAX_BUDGET_S`, in one line."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("none", "off"):
        return None

    def bad(why: str) -> BadInputError:
        return BadInputError(f"--time-budget {short_repr(value, 40)} {why}; give {FORMS}, e.g. --time-budget 10m")

    if isinstance(value, bool):
        raise bad("is not a duration")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        if re.fullmatch(r"-\s*[\d.]+[hms]?", text):
            raise bad("must be more than zero")
        m = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?", text)
        if not text or m is None or not any(m.groups()) or (text[-1].isdigit() and (m.group(1) or m.group(2))):
            raise bad("is not a duration")  # "1h30" is refused: 1h30m or 1h30s?
        h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + s
    if not math.isfinite(seconds):
        raise bad("is not a finite duration")
    if seconds <= 0:
        raise bad("must be more than zero")
    if seconds > MAX_BUDGET_S:
        raise bad("is over the limit of 7 days (168h)")
    return seconds


def fmt_s(seconds: float) -> str:
    """``45 s``, ``7m10s``, ``2h05m``: a duration for people."""
    if not math.isfinite(seconds):
        return "unbounded"
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def suggest(seconds: float) -> str:
    """A ``--time-budget`` value at or above ``seconds``: whole minutes, rounded up."""
    return f"{max(1, math.ceil(seconds / 60))}m"


def budget_lines(rec: Mapping[str, Any] | None) -> list[str]:
    """A table's ``time_budget`` record for people (``nagkit profile``, ``lut show``, ``lut validate``)."""
    if not rec:
        return []
    b = rec.get("time_budget_s")
    head = (f"time budget {fmt_s(b)}: used {fmt_s(rec.get('elapsed_s') or 0)}" if b else
            f"no time budget: took {fmt_s(rec.get('elapsed_s') or 0)}") + (" (over budget)" if rec.get("over_budget") else "")
    miss = rec.get("skipped_for_time") or []
    if miss:
        head += "; left out for time: " + ", ".join(f"{m['phase']} ({m['items']})" for m in miss)
    lines = [head]
    fid = rec.get("fidelity")
    if fid:
        w10 = fid.get("within_10pct")
        lines.append(f"reached    held out (leave-one-out): {fid['within_5pct']:.0%} within ±5%"
                     + (f", {w10:.0%} within ±10%" if w10 is not None else "")
                     + ("" if fid.get("adopted") else " (raw block sums: the calibration was not adopted)"))
    elif b:
        lines.append("reached    no held-out fidelity (no calibration ran): check with `nagkit lut validate`")
    nv = rec.get("noise_verdict") or {}
    for k in ("blocks", "networks"):
        if nv.get(k):
            lines.append(f"noise      {nv[k]}")
    if rec.get("more_time"):
        lines.append(f"more time  {rec['more_time']}")
    return lines
