"""`nagkit build`'s limits beside the budget (issue 34, decisions 39): what the exported network
reaches, checked against each limit after export, for the result and the manifest.

The generator's masks already keep every candidate within the limits on the space's counts and
the file-size estimate; this is the check on what was really made: the exported files' bytes
(``--max-size-mb``), and the counts of the network as exported (a fine-tuned head with other
classes changes its parameters and MACs). Over any limit is a failed check (exit 1): the build
then writes nothing.
"""

from __future__ import annotations

from typing import Any

from nagkit.errors import CheckFailedError
from nagkit.nag.constraints import Limits, report, size_model
from nagkit.space.resources import ACTIVATION_BYTES


def limits_record(limits: Limits | None, budget_ms: float, predicted_ms: float, space, arch, ex,
                  precision: str) -> dict[str, Any]:
    """The manifest's ``constraints`` (also without limits: what the network reaches)."""
    from pathlib import Path

    files = {Path(m.path).name: int(m.size_bytes) for m in ex.models.values()}
    bpw, overhead = size_model(tuple(ex.models), precision)
    params = space.params(arch)
    reached = {"params": params, "macs": space.macs(arch), "size_mb": (params * bpw + overhead) / 1e6,
               # an int8 graph runs h-swish and SE in float: not modelled (decisions 39)
               "peak_kb": None if precision == "int8" else space.peak_activation(arch) * ACTIVATION_BYTES[precision] / 1000}
    rec = report(limits or Limits(), budget_ms, predicted_ms, reached, size_bytes=files)
    rec["precision"] = precision
    return rec


def check_limits(rec: dict[str, Any], limits: Limits | None) -> None:
    """Raise :class:`CheckFailedError` when the exported network is over a limit."""
    if limits is None or not limits.active:
        return
    over = [(k, r) for k, r in rec["constraints"].items() if k != "latency_ms" and r["value"] > r["limit"] * (1 + 1e-9)]
    if not over:
        return
    what = {"params": ("--max-params", "parameters"), "macs": ("--max-macs", "MACs"),
            "size_mb": ("--max-size-mb", "MB"), "peak_kb": ("--max-peak-kb", "kB")}
    parts = []
    for k, r in over:
        flag, unit = what[k]
        extra = ""
        if k == "size_mb":
            name, size = max(rec["reached"]["file_bytes"].items(), key=lambda kv: kv[1])
            extra = f" ({name}: {size:,} bytes; the estimate the generator used was {r['estimated_mb']:.4g} MB)"
        parts.append(f"{flag} {r['limit']:g}: the exported network reaches {r['value']:.6g} {unit}{extra}")
    raise CheckFailedError("the exported network is over its limit: " + "; ".join(parts) + "; nothing was written",
                           hint="lower the limit's target with some margin (e.g. a smaller --max-size-mb), or "
                                "report the file size: the estimate (decisions 39) should have kept it under")
