"""A profile in a time the user chooses: ``--time-budget``, the plan that keeps to it, and its record.

A profile's work runs in phases, in this order: converting the blocks not cached yet, block
pass 1, block passes 2..N, extra passes over the blocks no other pass confirms, and with
``--calibrate`` the calibration networks' conversions, a spread block pass, their passes, their
extra passes and a second spread block pass (decisions 29). Some of it is *required* for a
usable table (the conversions, block pass 1, and with ``--calibrate`` :data:`MIN_NETWORKS`
networks measured once); the rest is optional, each phase with a priority (:data:`PRIORITY`).

:class:`TimeBudget` is the plan. Before any conversion it sums the required phases at the
estimated rates (:data:`PRIORS`, from the issue-36 runs on the 2-core AMD EPYC VM) and refuses a
budget below that minimum, naming it (:meth:`TimeBudget.check_minimum`). During the run every
item (one block or network converted or measured) is reported with its seconds, and the rates
are re-estimated from what was observed. An optional item is started only when the time left
covers it *and* every other open phase that is required or of higher priority
(:meth:`TimeBudget.may_start`), so a short budget drops the least useful work first and a long
one does everything. The same rule, simulated forward at the current rates, gives the ETA
(:meth:`TimeBudget.forecast`). What was done and skipped goes into the table's provenance
(``time_budget``), with a sentence on what more time would buy.

The clock is injectable (``clock=``), so the deadline logic is tested without waiting.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError
from nagkit.latency.block_order import block_priority, block_weights, by_priority  # noqa: F401 (re-exported)
from nagkit.latency.budget_phase import NetworkPlan, Phase  # noqa: F401 (re-exported)
from nagkit.latency.budget_rates import (  # noqa: F401 (re-exported)
    LIKE_KINDS, PRIOR_WEIGHT, PRIORS, RATE_KINDS, RATES_FILE, Rates, rates_key, remember_rates, remembered_rates)
from nagkit.latency.budget_text import budget_lines, fmt_s, parse_time_budget, suggest  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

MARGIN = 0.03  # of the budget, kept for what no phase counts (start-up, logging, the table build)
FINISH_S = 4.0  # building and writing the table (and the calibration fit, when there is one)
FIT_S = 6.0  # a calibration's fit on up to 80 networks (the floor's cutting planes, leave-one-out)
CORE_NETWORKS = 30  # calibration networks worth more than extra block passes (decisions 31)

# Lower is more important; 0 is required. Passes 2 of the blocks come first (a noise estimate at
# all), then the minimum calibration networks' own passes, the default third block pass, the first
# CORE_NETWORKS networks, the extra block passes, the rest of the networks and their extra passes,
# and last the spread passes, which are insurance (decisions 29).
PRIORITY = {"block pass 2": 1, "network passes (minimum)": 2, "block pass 3+": 3, "networks to 30": 4,
            "block extra passes": 5, "networks beyond 30": 6, "network extra passes": 6,
            "spread block passes": 7}


@dataclass
class TimeBudget:
    """The plan of one profile (module doc). ``budget_s``: seconds, None (no budget: every
    optional phase runs, as before budgets existed) or ``"default"`` (resolved by
    :meth:`resolve`: what the device declares, :func:`nagkit.devices.base.default_time_budget`:
    :data:`~nagkit.devices.base.CPU_TIME_BUDGET_S` on this machine's CPU, none on a phone or GPU)."""

    budget_s: float | str | None = "default"
    clock: Callable[[], float] = time.monotonic
    rates: Rates | None = None  # None: :data:`PRIORS` of the device's format
    phases: list[Phase] = field(default_factory=list)
    t0: float = field(init=False)
    _obs: dict[str, list[float]] = field(default_factory=dict)  # kind -> [seconds, items]
    _prior: Rates | None = field(default=None, repr=False)
    net_passes: int = 1
    net_uncached: float = 1.0  # share of the calibration networks not converted yet
    network_plan: NetworkPlan | None = None
    calibrating: bool = False
    notes: list[str] = field(default_factory=list)
    at_start: dict[str, Any] | None = None  # the plan as announced (:meth:`announce`)
    memory: tuple[Path, str] | None = None  # where the observed rates are kept, and whose they are
    say: Callable[[str], None] = field(default=lambda m: log.info("%s", m), repr=False)  # the plan, for people
    probe: dict[str, Any] | None = None  # a cold cache's first conversions, timed before the plan (budget_probe)

    def __post_init__(self) -> None:
        self.t0 = self.clock()
        if self.budget_s not in (None, "default"):
            self.budget_s = parse_time_budget(self.budget_s)

    # -- time ---------------------------------------------------------------------------------
    @property
    def limited(self) -> bool:
        return isinstance(self.budget_s, float)

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def usable_left(self) -> float:
        """Seconds left for the phases: the budget less the margin, the finish and what has passed."""
        if not self.limited:
            return math.inf
        return self.budget_s * (1 - MARGIN) - self.finish_s() - self.elapsed()

    def finish_s(self) -> float:
        return FINISH_S + (FIT_S if self.calibrating else 0.0)

    def resolve(self, default_s: float | None, model_format: str, remembered: Rates | None = None) -> None:
        """``default_s``, the device's default budget (:func:`nagkit.devices.base.default_time_budget`:
        this machine's CPU 10 minutes, a phone or GPU none), when none was given; and the priors:
        rates given, else those the last profile of the device here observed (``remembered``),
        else :data:`PRIORS` of its model format."""
        if self.budget_s == "default":
            self.budget_s = default_s
        if self._prior is None:
            self._prior = self.rates or remembered or PRIORS.get(model_format, PRIORS["tflite"])

    def remember(self) -> None:
        """Keep the observed rates for the next plan (:func:`remember_rates`), when told where."""
        if self.memory is not None and self.observed_any():
            remember_rates(*self.memory, self.current_rates(), tuple(k for k, (_, n) in self._obs.items() if n))

    def observed_any(self) -> bool:
        return any(n for _, n in self._obs.values())

    def prior_source(self) -> str:
        """Where the rates planned with come from until the run observes its own."""
        return (self._prior or self.rates or PRIORS["tflite"]).source

    def set_prior(self, source: str, **rates: float) -> None:
        """Plan with these rates until the run observes its own (:mod:`nagkit.latency.budget_probe`)."""
        self._prior = replace(self._prior or self.rates or PRIORS["tflite"], source=source, **rates)

    # -- rates --------------------------------------------------------------------------------
    def rate(self, kind: str) -> float:
        prior = self._prior or self.rates or PRIORS["tflite"]
        if kind in ("network", "network1"):  # a calibration network: converted (unless cached), then measured
            # in every pass (a minimum network: once), less the measurements a resumed profile has
            return self.net_uncached * self.rate("convert_net_s") + \
                self._net_measures(kind == "network1") * self.rate("measure_net_s")
        p = getattr(prior, kind)
        s, n = self._obs.get(kind, (0.0, 0))
        if not n and kind in LIKE_KINDS:  # no network seen yet: the prior scaled as the blocks' was
            like = LIKE_KINDS[kind]
            _, bn = self._obs.get(like, (0.0, 0))
            if bn and getattr(prior, like) > 0:
                p *= self.rate(like) / getattr(prior, like)
        return (p * PRIOR_WEIGHT + s) / (PRIOR_WEIGHT + n) if n else p

    def net_passes_planned(self) -> int:
        return max(1, self.net_passes)

    def _net_measures(self, minimum: bool) -> float:
        """Measurements a calibration network still needs, on average: once for the minimum networks,
        every pass for the others, less what a resumed profile has journalled of them."""
        plan, p = self.network_plan, (1 if minimum else self.net_passes_planned())
        if plan is None:
            return float(p)
        lo, hi = (0, plan.minimum) if minimum else (plan.minimum, plan.wanted)
        return plan.to_measure(lo, hi, p) / (hi - lo) if hi > lo else float(p)

    def current_rates(self) -> Rates:
        src = "observed in this run" if self._obs else (self._prior.source if self._prior else "prior")
        return Rates(*(self.rate(k) for k in RATE_KINDS), source=src)

    def cost(self, ph: Phase, n: int | None = None) -> float:
        return self.rate(ph.kind) * (ph.remaining if n is None else n)

    # -- the plan -----------------------------------------------------------------------------
    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def add(self, name: str, kind: str, items: int, priority: int = 0, *, before: str | None = None) -> Phase:
        """Phase ``name`` of ``items`` ``kind`` items, placed before phase ``before`` (else last)."""
        ph = Phase(name, kind, max(0, int(items)), priority)
        ph.estimate_s = self.cost(ph)
        if ph.items == 0:
            ph.status = "done"
        at = next((i for i, p in enumerate(self.phases) if p.name == before), len(self.phases))
        self.phases.insert(at, ph)
        return ph

    def _reserve(self, idx: int, ph: Phase, opened: Sequence[Phase]) -> float:
        """Seconds kept for the phases after ``opened[idx]`` that are required or more important."""
        return sum(self.cost(q) for q in opened[idx + 1:]
                   if q.priority == 0 or (ph.priority and q.priority < ph.priority))

    def forecast(self) -> list[tuple[Phase, int]]:
        """(phase, items it will do) for every open phase, simulating :meth:`may_start`'s rule
        from now at the current rates."""
        opened = [p for p in self.phases if p.open]
        left = self.usable_left()
        out = []
        for i, ph in enumerate(opened):
            c = self.rate(ph.kind)
            if ph.priority == 0 or not self.limited or c <= 0:
                n = ph.remaining
            else:
                n = min(ph.remaining, max(0, math.floor((left - self._reserve(i, ph, opened)) / c)))
            left -= n * c
            out.append((ph, n))
        return out

    def eta_s(self) -> float:
        """Seconds until the run ends, as planned now."""
        return sum(self.rate(ph.kind) * n for ph, n in self.forecast()) + self.finish_s()

    def minimum_s(self) -> float:
        """The required phases at the current rates, the finish and the margin: below it, no
        usable table."""
        need = sum(self.cost(p) for p in self.phases if p.priority == 0) + self.finish_s()
        return need / (1 - MARGIN)

    def check_minimum(self, what: str = "profile", fewer: str | None = None) -> None:
        """Refuse (exit 2, nothing written) a budget below :meth:`minimum_s`, naming it; ``what``
        names the run, ``fewer`` the option that asks for less work (default: a profile's)."""
        if not self.limited:
            return
        need = self.minimum_s() + self.elapsed()
        if self.budget_s < need:
            parts = "; ".join(f"{p.name} {fmt_s(self.cost(p))}" for p in self.phases if p.priority == 0 and p.remaining)
            if fewer is None and any(p.kind == "convert_block_s" and p.remaining for p in self.phases):
                fewer = "profile fewer --resolutions"
            raise BadInputError(
                f"--time-budget {fmt_s(self.budget_s)} is below this {what}'s minimum of about {fmt_s(need)} "
                f"({parts}; finishing {fmt_s(self.finish_s())}; rates: {self.current_rates().source})",
                hint=f"give --time-budget {suggest(need)} or more" + (f", or {fewer}" if fewer else ""))

    def may_start(self, name: str, n: int = 1) -> bool:
        """Whether ``n`` more items of phase ``name`` fit in the time left, keeping time for every
        other open phase that is required or more important. Required phases always may."""
        ph = self.phase(name)
        if ph is None or not self.limited or ph.priority == 0:
            return True
        # every other open phase, not only the later ones in the list: a spread block pass runs
        # between the networks' conversions and their passes, yet is the least important
        others = [p for p in self.phases if p.open and p is not ph]
        keep = sum(self.cost(q) for q in others if q.priority == 0 or q.priority < ph.priority)
        return self.usable_left() - keep >= self.rate(ph.kind) * n

    def done(self, name: str, n: int = 1, seconds: float = 0.0) -> None:
        """``n`` items of phase ``name`` done in ``seconds``; the rate of its kind is observed."""
        ph = self.phase(name)
        if ph is None:
            return
        ph.done += n
        ph.spent_s += seconds
        if ph.status == "planned":
            ph.status = "running"
        if ph.done >= ph.items and ph.open:
            ph.status = "done"
        if ph.kind in RATE_KINDS and n > 0:
            s = self._obs.setdefault(ph.kind, [0.0, 0])
            s[0] += seconds
            s[1] += n

    def ticker(self, name: str) -> Callable[[], None]:
        """A callback for work that reports each item as it finishes (conversions): each call is
        one item of phase ``name``, timed from the call before (or from now)."""
        last = [self.clock()]

        def tick() -> None:
            now = self.clock()
            self.done(name, 1, now - last[0])
            last[0] = now

        return tick

    def stop(self, name: str, why: str = "time") -> None:
        """Phase ``name`` ends here (for time): its remaining items are skipped."""
        ph = self.phase(name)
        if ph is not None and ph.open:
            ph.status = ("stopped" if ph.done else "skipped") + f" for {why}"
            log.info("time budget: %s %s after %d of %d (%s of %s used)", ph.name, ph.status, ph.done, ph.items,
                     fmt_s(self.elapsed()), fmt_s(self.budget_s) if self.limited else "no budget")

    def finish(self, name: str) -> None:
        """Phase ``name`` is over (all it meant to do is done)."""
        ph = self.phase(name)
        if ph is not None and ph.open:
            ph.status = "done"

    def close(self, name: str) -> None:
        """Phase ``name`` is over: done if all its items are, else what is left was skipped for time."""
        ph = self.phase(name)
        if ph is not None and ph.open:
            if ph.remaining:
                self.stop(name)
            else:
                ph.status = "done"

    def grow(self, name: str, items: int) -> None:
        """Phase ``name`` now plans ``items`` (e.g. the extra passes, once the unconfirmed are known)."""
        ph = self.phase(name)
        if ph is not None and ph.open:
            ph.items = ph.done + max(0, int(items))
            if ph.items <= ph.done:
                ph.status = "done"

    # -- what a profile plans ------------------------------------------------------------------
    def plan_blocks(self, n_blocks: int, uncached: int, missing: Sequence[int], extra_passes: int) -> None:
        """The block phases, before any network phase: ``missing[p-1]``: blocks without a pass ``p``
        (``len(missing)`` passes asked)."""
        at = next((p.name for p in self.phases if "network" in p.name), None)
        at = at or ("spread block passes" if self.phase("spread block passes") else None)
        self.add("convert blocks", "convert_block_s", uncached, 0, before=at)
        self.add("block pass 1", "measure_block_s", missing[0] if missing else 0, 0, before=at)
        if len(missing) > 1:
            self.add("block pass 2", "measure_block_s", missing[1], PRIORITY["block pass 2"], before=at)
        if len(missing) > 2:
            self.add("block pass 3+", "measure_block_s", sum(missing[2:]), PRIORITY["block pass 3+"], before=at)
        if extra_passes and len(missing) > 1:  # a guess until the passes show which blocks are unconfirmed
            self.add("block extra passes", "measure_block_s", math.ceil(0.25 * n_blocks) * min(extra_passes, 2),
                     PRIORITY["block extra passes"], before=at)

    def plan_networks(self, plan: NetworkPlan, n_blocks: int, spread: bool) -> None:
        """The calibration's phases: the minimum networks measured once (required), their further
        passes, the networks up to :data:`CORE_NETWORKS`, the rest up to the count asked, and with
        ``spread`` the two spread block passes (decisions 29), each at its priority."""
        self.network_plan = plan
        wanted, minimum, passes = plan.wanted, plan.minimum, plan.passes
        self.calibrating = True
        self.net_passes = passes
        self.net_uncached = plan.uncached_share
        self.add("calibration networks (minimum)", "network1", minimum, 0)
        self.add("network passes (minimum)", "measure_net_s", plan.to_measure(0, minimum, passes) -
                 plan.first_passes(0, minimum), PRIORITY["network passes (minimum)"])
        self.add("networks to 30", "network", max(0, min(CORE_NETWORKS, wanted) - minimum), PRIORITY["networks to 30"])
        self.add("networks beyond 30", "network", max(0, wanted - max(CORE_NETWORKS, minimum)),
                 PRIORITY["networks beyond 30"])
        if spread:
            self.add("spread block passes", "measure_block_s", 2 * n_blocks, PRIORITY["spread block passes"])

    def choose_networks(self, plan: NetworkPlan) -> tuple[int, int]:
        """(networks, passes) the calibration measures, chosen now as the plan forecasts them;
        (0, 0) when not even the minimum networks measured once fit in the time left. The network
        tiers close (what they leave out is skipped for time) and the concrete phases are added.
        A plan without network phases (none was made: :meth:`plan_networks`) gets all it asked."""
        tiers = ("calibration networks (minimum)", "networks to 30", "networks beyond 30")
        first = self.phase(tiers[0])
        if first is None:
            return plan.wanted, plan.passes
        uncached = plan.uncached
        fc = {ph.name: k for ph, k in self.forecast()}
        n = sum(fc.get(t, 0) for t in tiers)
        if self.limited and first is not None and self.cost(first) > self.usable_left():
            n = 0
        mp = self.phase("network passes (minimum)")
        p = self.net_passes
        if mp is not None and mp.items:
            p = 1 + (fc.get(mp.name, 0) * (self.net_passes - 1)) // mp.items if n else 0
        for name in (*tiers, "network passes (minimum)"):
            ph = self.phase(name)
            if ph is not None and ph.open:
                got = fc.get(name, 0) if n else 0
                ph.done = min(ph.items, got)
                ph.status = "done" if ph.done >= ph.items else ("stopped for time" if ph.done else "skipped for time")
        if not n:
            self.notes.append("calibration left out for time: not even the minimum networks fit in the time left")
            sp = self.phase("spread block passes")
            if sp is not None and sp.open:
                sp.status = "skipped for time"
            return 0, 0
        self.net_passes = max(1, p)
        sp = self.phase("spread block passes")
        at = sp.name if sp is not None else None
        self.add("convert networks", "convert_net_s", uncached(n), 0, before=at)
        first = plan.first_passes(0, n)  # a resumed profile's journalled measurements are not made again
        self.add("network pass 1", "measure_net_s", first, 0, before=at)
        self.add("network passes 2+", "measure_net_s", plan.to_measure(0, n, self.net_passes) - first,
                 PRIORITY["network passes (minimum)"], before=at)
        self.add("network extra passes", "measure_net_s", 0 if self.net_passes < 2 else math.ceil(0.2 * n) * 2,
                 PRIORITY["network extra passes"], before=at)
        return n, self.net_passes

    def convert_while_time_allows(self, cache, space, archs: list, *, jobs: int | None, progress: bool,
                                  measures_for: Callable[[int], int], minimum: int = 0, label: str) -> list:
        """``archs`` converted into ``cache`` (a :class:`~nagkit.latency.validate.NetworkCache`)
        while the budget allows another: one more starts only if the ``k + 1`` networks converted
        by then still get their ``measures_for(k + 1)`` measurements in the time left (never
        fewer than ``minimum`` networks). Returns those converted, in their order; when the
        budget stopped the rest, the phase says so and the log names ``label``. Shared by the
        calibration (:meth:`convert_networks`) and ``lut validate``, which re-plan their passes."""
        cached = len(archs) - len(cache.uncached(space, archs))

        def go() -> bool:
            ph = self.phase("convert networks")
            k = cached + (ph.done if ph else 0)
            if not self.limited or k < minimum:
                return True
            return self.usable_left() - measures_for(k + 1) * self.rate("measure_net_s") >= self.rate("convert_net_s")

        cache.prepare(space, archs, jobs=jobs, progress=progress, on_each=self.ticker("convert networks"),
                      keep_going=go)
        left = set(cache.uncached(space, archs))
        ready = [a for a in archs if a not in left]
        if left:
            log.warning("%s: the time budget stopped the networks' conversions at %d of %d; going on with those",
                        label, len(ready), len(archs))
            self.stop("convert networks")
        return ready

    def convert_networks(self, cache, space, archs: list, *, jobs: int | None, progress: bool, passes: int) -> list:
        """The calibration networks ``archs`` converted while the budget allows another
        (:meth:`convert_while_time_allows`): the networks converted so far must still get their
        ``passes`` (never fewer than the plan's minimum; conversion was a real run's overrun:
        19.8 s a network, not the prior's 7.5). Returns those converted; the plan shrinks to them."""
        plan = self.network_plan
        ready = self.convert_while_time_allows(
            cache, space, archs, jobs=jobs, progress=progress, label="calibration",
            minimum=plan.minimum if plan else 0,
            measures_for=lambda k: plan.to_measure(0, k, max(1, passes)) if plan else k * passes)
        if len(ready) < len(archs):
            plan = plan or NetworkPlan(len(archs), 0, passes, 0.0, lambda n: 0)
            first = plan.to_measure_of(ready, 1)
            self.grow("network pass 1", first)
            self.grow("network passes 2+", plan.to_measure_of(ready, max(1, passes)) - first)
            self.notes.append(f"the calibration networks' conversions were stopped for time: calibrated on {len(ready)}")
        return ready

    # -- output -------------------------------------------------------------------------------
    def note(self) -> str:
        """The run's place against the budget, for every progress line; nothing without a budget
        (a phone's conversions overlap its measurements, which the forecast does not model, so
        its "left" would be wrong; each progress line keeps its own phase's eta)."""
        if not self.limited:
            return ""
        return f"run {fmt_s(self.elapsed())} of {fmt_s(self.budget_s)}, about {fmt_s(self.eta_s())} left"

    def plan_text(self) -> str:
        """The plan in one log line: what will run, what the budget leaves out."""
        fc = self.forecast()
        will = [f"{ph.name} {n}/{ph.remaining}" if n < ph.remaining else f"{ph.name} {n}" for ph, n in fc if n]
        skip = [ph.name for ph, n in fc if n == 0 and ph.remaining]
        head = (f"time budget {fmt_s(self.budget_s)}" if self.limited else "no time budget") + \
               f", estimated {fmt_s(self.elapsed() + self.eta_s())} ({self.current_rates().source})"
        return head + ": " + ", ".join(will) + (f"; left out for time: {', '.join(skip)}" if skip else "")

    def announce(self) -> None:
        """Say the plan (once the phases are known, before any conversion) and keep it for the record."""
        text = self.plan_text()
        self.at_start = {"plan": text, "estimate_s": round(self.elapsed() + self.eta_s(), 1),
                         "minimum_s": round(self.minimum_s(), 1), "rates": self.current_rates().to_dict(),
                         **({"probe": self.probe} if self.probe else {})}
        self.say(text)

    def skipped(self) -> list[dict[str, Any]]:
        """Planned work not done for lack of time, with its estimated seconds."""
        out = []
        for ph in self.phases:
            miss = max(0, ph.items - ph.done)
            if miss and ph.status.endswith("for time"):
                out.append({"phase": ph.name, "items": miss, "estimate_s": round(self.rate(ph.kind) * miss, 1)})
        return out

    def more_time_sentence(self) -> str:
        """What more time would likely buy, from what was skipped and its estimated cost."""
        miss = self.skipped()
        if not miss:
            return ("nothing planned was left out for time: a longer budget alone would not change this table "
                    "(more --calibrate networks or --block-passes would)")
        extra = sum(m["estimate_s"] for m in miss)
        what = ", ".join(f"{m['phase']} ({m['items']} {_unit(m['phase'])})" for m in miss)
        return f"about {fmt_s(extra)} more would add: {what}: rerun the same command with {self.resume_with()}"

    def resume_with(self) -> str | None:
        """The options that resume this profile with the time what was skipped needs (None: nothing was).
        A resumed run redoes none of the journalled work: blocks and calibration networks alike."""
        miss = self.skipped()
        if not miss:
            return None
        need = (sum(m["estimate_s"] for m in miss) + self.finish_s()) / (1 - MARGIN)
        return f"--resume --time-budget {suggest(need)}"

    def record(self, **extra: Any) -> dict[str, Any]:
        """The ``time_budget`` provenance: budget, elapsed, rates, phases, skipped, more time."""
        passes = {ph.name: ph.done for ph in self.phases if ph.status != "replaced"}
        over = self.limited and self.elapsed() > self.budget_s
        return {"time_budget_s": self.budget_s if self.limited else None, "elapsed_s": round(self.elapsed(), 2),
                "over_budget": bool(over), "at_start": self.at_start, "rates": self.current_rates().to_dict(),
                "phases": [ph.to_dict() for ph in self.phases if ph.status != "replaced"], "done": passes,
                "skipped_for_time": self.skipped(), "more_time": self.more_time_sentence(),
                "resume_with": self.resume_with(),
                "notes": list(self.notes), **extra}


def _unit(phase: str) -> str:
    if "network pass" in phase or "network extra" in phase:
        return "network measurements"
    if "network" in phase:
        return "networks"
    return "block measurements" if "pass" in phase else "conversions" if "convert" in phase else "items"


def with_rates(budget: TimeBudget, **kw: float) -> TimeBudget:
    """``budget`` with its priors replaced (tests; a benchmark that knows its machine)."""
    budget.rates = replace(budget.rates or PRIORS["tflite"], **kw)
    budget._prior = budget.rates
    return budget
