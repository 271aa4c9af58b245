"""A cold cache's first block conversions, timed before a time budget's plan commits (decisions 42).

With a cold block cache and no rates observed on this machine, a profile's minimum is summed at
the priors (:data:`~nagkit.latency.budget_rates.PRIORS`: 3.2 s a block conversion, the slow
2-core EPYC's), which a faster machine does in a third of that: its ``--time-budget 3m`` was
refused naming a minimum of 7 minutes. So when a budget is below the minimum at the priors but
would cover it were the conversions free, a few of the conversions the profile needs anyway are
timed first, in the processes the profile would convert with (:func:`convert_many`, ``jobs``), into
a temporary folder: the conversion rate planned with is their steady rate (after each process's
first conversion, which carries its start-up), with :data:`SAFETY` to spare, plus the start-up of
the processes converting the rest. The minimum is checked at that rate, and the refusal (exit 2)
names it; only when the budget passes are the probe's files moved into the block cache, so a
refusal writes nothing and an accepted plan converts nothing twice.

A budget below the minimum even with free conversions (but for the probe's own start of the
converter, :data:`START_S`) is refused at once, without a probe; a
budget that the priors already cover, or rates observed here before (``profile-rates.json``),
never probes. The measurement rate stays the prior's or the remembered one (the issue-36 runs
measured faster than it: 0.7 s a block against 1.1).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path

from nagkit.latency.budget import MARGIN
from nagkit.latency.budget_text import fmt_s

log = logging.getLogger(__name__)

PROBE_PER_JOB = 3  # conversions per process: its first carries its start-up, the others time the steady rate
SAFETY = 1.25  # the probed rate is planned this much slower: a few conversions on a shared machine
START_S = 8.0  # the converter's start in a process (importing torch and litert-torch: decisions 40)


def probe_worth(budget) -> bool:
    """Whether timing a few conversions could let ``budget`` (a :class:`~nagkit.latency.budget.TimeBudget`
    whose blocks are planned) pass its minimum: a budget below the minimum at the priors, above it
    were the conversions free but for one more start of the converter (the probe's), and no rate
    observed on this machine yet."""
    conv = budget.phase("convert blocks")
    if not budget.limited or conv is None or not conv.remaining or budget.observed_any() \
            or budget.prior_source() != "prior":
        return False
    need = budget.minimum_s() + budget.elapsed()
    return need > budget.budget_s >= need + (START_S - budget.cost(conv)) / (1 - MARGIN)


class Probe:
    """The probe's converted blocks (key -> file in a temporary folder), until :meth:`keep` moves them."""

    def __init__(self, staged: Mapping[str, Path] | None = None):
        self.staged = dict(staged or {})

    def keep(self, cache) -> None:
        """Into the block cache (each file written atomically), counted as converted by this profile."""
        from nagkit.io import atomic_write_bytes

        for key, src in self.staged.items():
            dest = cache.path_for(key)
            if not cache.cached(key):
                dest.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(dest, src.read_bytes())
        cache.converted(len(self.staged))
        self.staged = {}


def _rate(t0: float, done: list[float], jobs: int, rest: int) -> tuple[float, float, float]:
    """(steady seconds a block, start-up seconds, the rate to plan with) from the completion times
    ``done`` of conversions started at ``t0`` in ``jobs`` processes, ``rest`` conversions left."""
    k = len(done)
    steady = (done[-1] - done[jobs - 1]) / (k - jobs)
    startup = max(0.0, done[jobs - 1] - t0 - steady * jobs)  # each process's first conversion, less one conversion
    restart = startup if jobs > 1 else 0.0  # one process converts in this one, already started
    return steady, startup, SAFETY * steady + (restart / rest if rest else 0.0)


@contextlib.contextmanager
def probe_conversions(budget, cache, layers: Mapping, *, jobs: int | None, progress: bool) -> Iterator[Probe]:
    """Within: the probe (none when not worth it: :func:`probe_worth`), its rate set as the plan's
    conversion prior (:meth:`~nagkit.latency.budget.TimeBudget.set_prior`) and its conversions
    counted done. Its files are removed on leaving unless :meth:`Probe.keep` took them."""
    from nagkit.latency.blocks import convert_many, default_jobs

    if not probe_worth(budget):
        yield Probe()
        return
    conv = budget.phase("convert blocks")
    uncached = [k for k in layers if not cache.cached(k)]
    j = max(1, min(cache.jobs_for(jobs) or default_jobs(), len(uncached) // (2 * PROBE_PER_JOB)))
    n = min(PROBE_PER_JOB * j, len(uncached) // 2)
    if n <= j:  # too few to time a steady rate: the priors stand
        yield Probe()
        return
    keys = [uncached[int(i * len(uncached) / n)] for i in range(n)]  # spread over the list: small and large blocks
    tmp = Path(tempfile.mkdtemp(prefix="nagkit-probe-"))
    try:
        staged = {k: tmp / cache.path_for(k).name for k in keys}
        tasks = [("block", asdict(layers[k]), cache.fmt, str(staged[k]), cache.precision) for k in keys]
        budget.say(f"time budget {fmt_s(budget.budget_s)} is below the minimum at the prior rates "
                   f"({fmt_s(budget.minimum_s() + budget.elapsed())}): timing {n} of the {len(uncached)} block "
                   "conversions on this machine first")
        t0, done = budget.clock(), []
        convert_many(tasks, jobs=j, progress=progress, label="convert blocks (timing)",
                     on_each=lambda: done.append(budget.clock()))
        steady, startup, rate = _rate(t0, done, j, len(uncached) - n)
        conv.done, conv.spent_s, conv.status = conv.done + n, conv.spent_s + done[-1] - t0, "running"
        budget.probe = {"blocks": n, "jobs": j, "seconds": round(done[-1] - t0, 2), "steady_s": round(steady, 3),
                        "startup_s": round(startup, 2), "safety": SAFETY, "planned_convert_block_s": round(rate, 3)}
        budget.set_prior(f"prior, block conversion timed here ({n} blocks: {steady:.2f} s each, planned at "
                         f"{rate:.2f} s)", convert_block_s=rate)
        log.info("time budget: %d block conversions timed here: %.2f s each after a %.1f s start-up; planned at "
                 "%.2f s a block", n, steady, startup, rate)
        yield Probe(staged)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
