"""`nagkit profile` (and ``nagkit.profile()``): a device measured block by block into a table.

What the command adds to :func:`nagkit.latency.profiler.profile`: the defaults (the default
workspace's space, every resolution of it, ``latency_tables/<model>-<runtime>-<space>.json``),
opening the device with ``--benchmark-binary``, the optional calibration afterwards, and the time
budget the whole of it keeps to (``--time-budget``: :mod:`nagkit.latency.budget`), whose record
goes into the table's provenance (``time_budget``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError
from nagkit.latency.calibration import MIN_NETWORKS

DEFAULT_COUNT = "default"  # ``calibrate``: the default number of networks


@dataclass(frozen=True)
class ProfileOptions:
    """``space``: a space name or JSON file (default: the default workspace's); ``resolutions``:
    default all of the space's; ``out``: default ``latency_tables/<model>-<runtime>-<space>.json``;
    ``benchmark_binary``: a phone's ``benchmark_model`` to push; ``calibrate``: then measure N
    whole networks and calibrate the table on them (``"default"``: the default count; 0 or None:
    no calibration; adopted only if it beats the raw block sum on held-out networks; with more than
    one block pass, every block gets one more after the networks' conversions and one after their
    passes: decisions 29);
    ``precision``: ``fp32``, ``int8`` (blocks and networks quantized, an int8 table) or ``fp16``
    (tflite devices: float16 weights, an fp16 table);
    ``block_passes``: passes over the blocks, the best recorded (default: 3 on this machine's
    CPU, 1 on a phone; :mod:`nagkit.latency.passes`);
    ``time_budget``: the time the whole profile keeps to, calibration included: seconds or text
    (``"10m"``, ``"1h30m"``), ``"default"`` (10 minutes on this machine's CPU, no budget on a
    phone or GPU) or ``"none"`` (:mod:`nagkit.latency.budget`)."""

    space: str | None = None
    resolutions: Sequence[int] | None = None
    out: str | Path | None = None
    benchmark_binary: str | None = None
    resume: bool = False
    force: bool = False
    cache_dir: str | Path | None = None
    jobs: int | None = None
    progress: bool = True
    calibrate: int | str | None = 0
    calibrate_seed: int = 1
    precision: str = "fp32"
    block_passes: int | None = None
    command: str | None = None
    time_budget: float | str | None = "default"


def default_space_name() -> str:
    """The default workspace's space: a table of it re-targets the default workspace."""
    from nagkit.app.workspace import DEFAULT_PRESET, load_workspace

    return load_workspace(DEFAULT_PRESET).space.name


def space_from_arg(text: str):
    """A registered space name, or a JSON file holding a space definition (SearchSpace fields)."""
    import json

    from nagkit.space import SearchSpace, get_space

    if text.endswith(".json"):
        from nagkit.io import read_input_file, shown_path

        raw = read_input_file(text, "space file", max_bytes=1 << 20, hint="list named spaces with `nagkit space show`")
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise BadInputError(f"space file {shown_path(text)} is not valid JSON: {str(e)[:160]}") from None
        if not isinstance(obj, dict) or "name" not in obj:
            raise BadInputError(f"space file {shown_path(text)} must hold a JSON object with a space's fields, "
                                "its name among them", hint="see `nagkit space show NAME --json` for one")
        from nagkit.space.spec_check import spec_field_problem

        if (problem := spec_field_problem(obj)) is not None:
            raise BadInputError(f"space file {shown_path(text)}: {problem}")
        return SearchSpace.from_dict(obj)
    return get_space(text)


def open_device(spec, benchmark_binary: str | None = None):
    """The device to profile (``spec``: a spec string, a DeviceSpec or an open device)."""
    from nagkit.devices.registry import get_device, parse_device_spec

    if not spec:
        raise BadInputError("no device given", hint="pass --device, e.g. --device adb:SERIAL (`adb devices` lists "
                                                    "serials) or --device cpu; `nagkit devices` lists what is here")
    if not isinstance(spec, str):
        if benchmark_binary is not None:
            raise BadInputError("benchmark_binary goes with a device spec, not an open device")
        return spec
    if benchmark_binary is None:
        return get_device(spec)
    ds = parse_device_spec(spec)
    if ds.kind != "adb":
        raise BadInputError(f"--benchmark-binary is for phones over ADB; {spec!r} is a {ds.kind} device",
                            hint="drop --benchmark-binary")
    return get_device(ds, benchmark_binary=benchmark_binary)


def run_profile(device, options: ProfileOptions = ProfileOptions(), *,
                on_start: Callable[[Path, Mapping[str, Any], Any, list[int]], None] | None = None,
                budget=None):
    """Profile ``device`` (a spec or an open device, closed at the end only when opened here).
    Returns ``(ProfileResult, table, calibration)``: the table calibrated when asked, and the
    calibration's result (:class:`nagkit.latency.validate` ``calibrate``; None without one). ``on_start(out, facts,
    space, resolutions)`` runs once the device has been checked, before any conversion.
    ``budget``: a :class:`~nagkit.latency.budget.TimeBudget` to use instead of one made from
    ``options.time_budget`` (tests give one with their own clock and rates)."""
    from nagkit.latency.budget import TimeBudget
    from nagkit.latency.profiler import profile
    from nagkit.progress import progress_note, say

    o = options
    if budget is None:  # a bad budget: refused first, before anything is opened or written
        budget = TimeBudget(o.time_budget, **({"say": say} if o.progress else {}))
    if isinstance(o.calibrate, int) and 0 < o.calibrate < MIN_NETWORKS:  # refused before any block is measured
        raise BadInputError(f"--calibrate {o.calibrate}: a calibration needs at least {MIN_NETWORKS} measured "
                            "networks (one scale and offset, checked leave-one-out)",
                            hint="give --calibrate alone for the default count, or leave it out (no calibration)")
    from nagkit.runtimes.convert import check_precision_name

    check_precision_name(o.precision)  # an unknown precision: refused before the device is opened
    from nagkit.latency.profiler import check_passes

    check_passes(o.block_passes, None)
    sp = space_from_arg(o.space or default_space_name())
    res = sorted({int(r) for r in o.resolutions}) if o.resolutions else list(sp.resolutions)
    bad = [r for r in res if r not in sp.resolutions]
    if bad:
        raise BadInputError(f"resolution(s) {bad} not in space {sp.name!r}; allowed: "
                            f"{', '.join(map(str, sp.resolutions))}")
    dev = open_device(device, o.benchmark_binary)
    have: dict[str, int] = {}  # the calibration's passes a resumed profile has journalled: read once `out` is known

    def start(out, facts) -> None:
        if nets is not None and o.resume:
            from nagkit.latency.journal import device_identity
            from nagkit.latency.net_journal import journalled_passes

            have.update(journalled_passes(out, device_identity(dev, o.precision), sp, nets[0]))
        if on_start is not None:
            on_start(out, facts, sp, res)

    try:
        nets = _calibration_networks(dev, sp, res, o, have)
        with progress_note(budget.note if o.progress else None):
            result = profile(dev, sp, res, o.out, resume=o.resume, force=o.force, cache_dir=o.cache_dir,
                             progress=o.progress, command=o.command, jobs=o.jobs, on_start=start,
                             precision=o.precision, passes=o.block_passes, budget=budget,
                             networks=None if nets is None else nets[1])
            table, cal = result.table, None
            if nets is not None:
                table, cal = _calibrate(dev, sp, res, o, result, nets, budget)
        table = _with_budget_record(table, cal, budget)
        table.save(result.out)
        budget.remember()  # with the networks' rates too
        from nagkit.latency.table import LatencyTable

        result.table = table = LatencyTable.load(result.out)
    finally:
        if dev is not device:
            dev.close()
    return result, table, cal


def _calibration_networks(dev, sp, res, o: ProfileOptions, journalled: Mapping[str, int]):
    """(the calibration's archs as asked, the budget's network plan), or None without ``--calibrate``.
    The first n of the archs are the archs of a calibration of n (they are drawn in sequence).
    ``journalled``: the passes of each a resumed profile has (filled in before the plan is made)."""
    if not o.calibrate:  # None or 0: no calibration; "default": the default count
        return None
    from nagkit.latency.budget import NetworkPlan
    from nagkit.latency.calibration import DEFAULT_NETWORKS
    from nagkit.latency.validate import NETWORK_PASSES, NetworkCache, random_archs

    wanted = DEFAULT_NETWORKS if o.calibrate == DEFAULT_COUNT else int(o.calibrate)
    archs = random_archs(sp, wanted, o.calibrate_seed, res)  # too many for the space: refused before any work
    uncached = set(NetworkCache(dev.model_format, o.cache_dir, o.precision).uncached(sp, archs))
    return archs, NetworkPlan(wanted, MIN_NETWORKS, NETWORK_PASSES, len(uncached) / wanted,
                              lambda n: sum(1 for a in archs[:n] if a in uncached), archs, journalled)


def _calibrate(dev, sp, res, o: ProfileOptions, result, nets, budget):
    """The calibration after the blocks, with as many networks and passes as the budget leaves
    (:meth:`~nagkit.latency.budget.TimeBudget.choose_networks`); ``(table, None)`` when not even
    the minimum fits any more."""
    from nagkit.latency.validate import calibrate

    table = result.table
    archs, plan = nets
    n, passes = budget.choose_networks(plan)
    if n == 0:
        import logging

        logging.getLogger("nagkit.latency").warning(
            "calibration left out: the time budget has no room left for %d networks; the table keeps its raw "
            "block sums (rerun with --resume and a larger --time-budget to calibrate it)", MIN_NETWORKS)
        return table, None
    if n < len(archs):
        budget.say(f"calibration: {n} of {len(archs)} networks, {passes} pass(es), as the time budget allows")
    spread = None
    if (result.table.provenance.get("passes_asked") or 1) > 1:  # blocks timed on this machine's CPU
        from nagkit.latency.profiler import spread_block_pass

        def spread(when: str):
            return spread_block_pass(dev, sp, result.out, when=when, cache_dir=o.cache_dir, progress=o.progress,
                                     budget=budget)
    count = None if o.calibrate == DEFAULT_COUNT and n == plan.wanted else n  # None: the default count
    from nagkit.latency.journal import device_identity, journal_lock
    from nagkit.latency.net_journal import network_journal_path, open_network_journal

    with journal_lock(network_journal_path(result.out)):  # every measurement kept for --resume (decisions 42)
        journal = open_network_journal(result.out, device_identity(dev, o.precision), sp, resume=o.resume,
                                       command=o.command)
        cal = calibrate(table, dev, sp, count, seed=o.calibrate_seed, resolutions=res, cache_dir=o.cache_dir,
                        progress=o.progress, jobs=o.jobs, block_pass=spread, passes=passes, budget=budget,
                        journal=journal)
    if spread is not None:  # the table the spread passes rebuilt, which the fit was made on (decisions 29)
        from nagkit.latency.table import LatencyTable

        table = LatencyTable.load(result.out)
    budget.close("spread block passes")
    return cal.apply(table), cal


def _with_budget_record(table, cal, budget):
    """``table`` with the budget's record in its provenance (``time_budget``): what was done and
    skipped, the held-out fidelity the calibration reached, the noise verdict, what more time buys."""
    from dataclasses import replace

    from nagkit.latency.calibration import NOISE_LIMIT_PCT, block_noise_warning
    from nagkit.latency.passes import statistic_sd

    fid = None
    if cal is not None:
        ho = cal.record["held_out"]
        pre = "calibrated" if cal.adopted else "raw"
        fid = {"held_out": ho["method"], "adopted": cal.adopted, "within_5pct": ho[f"{pre}_within_5pct"],
               "within_10pct": ho.get(f"{pre}_within_10pct"), "mape": ho[f"{pre}_mape"]}
    bp = table.provenance.get("block_passes") or {}
    sd = statistic_sd(bp.get("noise"))
    blocks = block_noise_warning(bp) or (
        "blocks measured once: their noise is not known" if sd is None else
        f"blocks: the best of a block's passes varies by {sd:.1f}% (1 sd; limit {NOISE_LIMIT_PCT}%): quiet enough")
    verdict = {"blocks": blocks, "networks": ((cal.record.get("verdict") or {}).get("text") if cal else None)}
    rec = budget.record(fidelity=fid, noise_verdict=verdict)
    return replace(table, provenance={**table.provenance, "time_budget": rec}, _cache={})
