"""How fast a profile's work goes: the rates a time budget plans with (:mod:`nagkit.latency.budget`).

:data:`PRIORS` by model format, until a run observes its own; and the rates the last profile of a
device observed on this machine, kept beside the block cache (:data:`RATES_FILE`), which the
next plan of the same device starts from instead of the priors.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rates:
    """Seconds per item: a block converted (wall time, all conversion processes together), a block
    measured once, a network converted, a network measured once."""

    convert_block_s: float
    measure_block_s: float
    convert_net_s: float
    measure_net_s: float
    source: str = "prior"

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


# Priors by model format. tflite, blocks: the 2-core AMD EPYC VM of issue 36 (96 blocks of
# ofa-mbv3-w1.0 at r=224 converted in about 5 min; 593 block measurements in 649 s). Networks: 10 s
# a conversion and 2.5 s a measurement, between a quiet 2-core VM (80 conversions in about 10 min,
# decisions 31) and the first budgeted run here, which shared the CPU with a test suite (18.9 s and
# 3.6 s: decisions 40). The run replaces them with what it observes, and the next plan starts from those.
PRIORS = {"tflite": Rates(3.2, 1.1, 10.0, 2.5), "onnx": Rates(0.1, 1.1, 0.6, 1.5), "torch": Rates(0.0, 1.1, 0.0, 1.5)}
RATE_KINDS = ("convert_block_s", "measure_block_s", "convert_net_s", "measure_net_s")
# Before a network is converted or measured, its prior is scaled by how the blocks' observed rate
# compares with theirs (a machine twice as fast converts and measures both about twice as fast).
LIKE_KINDS = {"convert_net_s": "convert_block_s", "measure_net_s": "measure_block_s"}
PRIOR_WEIGHT = 2  # a prior counts as this many observed items


RATES_FILE = "profile-rates.json"  # beside the block cache: the rates the last profile of each device observed


def rates_key(identity: Mapping[str, Any], host: str) -> str:
    """Whose rates: a device (:func:`nagkit.latency.journal.device_identity`) on a host."""
    return "|".join(str(identity.get(k)) for k in ("spec", "model_format", "runtime", "threads", "precision")) + \
        f"|{host}"


def remembered_rates(path: Path, key: str) -> Rates | None:
    """The rates the last profile of ``key`` observed (None: none recorded, or a file that does not
    read as one: the priors are used, never a half-read record)."""
    import json

    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return None
        entry = json.loads(path.read_text(encoding="utf-8")).get(key)
        vals = [float(entry[k]) for k in RATE_KINDS]
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    if not all(math.isfinite(v) and 0 <= v < 3600 for v in vals):
        return None
    return Rates(*vals, source=f"observed by the profile of {str(entry.get('when'))[:20]} here")


def remember_rates(path: Path, key: str, rates: Rates, observed: tuple[str, ...] = RATE_KINDS) -> None:
    """Keep ``rates`` of the ``observed`` kinds (the earlier record's for the others) for the next
    plan of the same device here; a file that cannot be written is only logged."""
    import json

    from nagkit.io import atomic_write_json
    from nagkit.latency.table import utc_now

    try:
        old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        old = old if isinstance(old, dict) else {}
    except (OSError, ValueError, RecursionError):
        old = {}
    prev = old.get(key) if isinstance(old.get(key), dict) else {}
    entry = {k: (round(getattr(rates, k), 4) if k in observed or k not in prev else prev[k]) for k in RATE_KINDS}
    old[key] = {**entry, "when": utc_now()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, dict(sorted(old.items())[-200:]))
    except OSError as e:
        log.info("could not keep the observed rates in %s: %s", path, e)
