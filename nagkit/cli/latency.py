"""`nagkit profile` and `nagkit lut {import-ofa,predict,show,calibrate,validate}`."""

from __future__ import annotations

import click

from nagkit.cli.latency_text import describe_calibration, describe_fidelity  # noqa: F401 (re-exported)
from nagkit.cli.options import (FINITE, POSITIVE, BoundedInt, device_option, emit, json_option, seed_flag, seed_option,
                                verbosity_option)

lut_option = click.option("--lut", "lut_path", required=True, type=click.Path(dir_okay=False),
                          help="Latency table (JSON).")


def get_space_arg(text: str):
    """A registered space name, or a JSON file holding a space definition (SearchSpace fields)."""
    from nagkit.app.profile import space_from_arg

    return space_from_arg(text)


def _space_for(table, space_name: str | None):
    if space_name:
        return get_space_arg(space_name)
    return table.space()


@click.group()
def lut() -> None:
    """Latency tables: import OFA tables, predict, show, calibrate, validate."""


@lut.command("import-ofa")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Output table (JSON).")
@click.option("--space", "space_name", default="ofa-mbv3-w1.2", show_default=True,
              help="Space the OFA tables were measured for.")
@json_option
@verbosity_option
def import_ofa_cmd(directory: str, out: str, space_name: str, as_json: bool) -> None:
    """Import OFA's <r>_lookup_table.yaml files from DIRECTORY into one nagkit table."""
    from nagkit.latency.ofa import import_ofa

    sp = get_space_arg(space_name)
    table = import_ofa(directory, sp)
    path = table.save(out)
    lo, hi = table.latency_range(sp)
    result = {"out": str(path), "space": sp.name, "entries": len(table.entries),
              "resolutions": list(table.resolutions), "latency_range_ms": [lo, hi]}
    emit(result, as_json, lambda r: (
        f"imported {r['entries']} entries for {r['space']} at {len(r['resolutions'])} resolutions "
        f"({r['resolutions'][0]}..{r['resolutions'][-1]}) -> {r['out']}\n"
        f"latency range {lo:.2f} .. {hi:.2f} ms"))


@lut.command("predict")
@lut_option
@click.option("--arch", "archs", multiple=True, required=True,
              help="Arch: canonical string, OFA dict as JSON, or @FILE. Repeatable.")
@click.option("--space", "space_name", default=None, help="Space (default: the table's).")
@click.option("--breakdown", is_flag=True, help="Also list each layer's key and latency.")
@json_option
@verbosity_option
def predict_cmd(lut_path: str, archs: tuple[str, ...], space_name: str | None, breakdown: bool,
                as_json: bool) -> None:
    """Predict the latency of one or more architectures from a table."""
    from nagkit.cli.space import read_arch_arg
    from nagkit.latency.table import LatencyTable

    table = LatencyTable.load(lut_path)
    sp = _space_for(table, space_name)
    rows = []
    for text in archs:
        a = sp.parse_arch(read_arch_arg(text))
        raw = table.predict(sp, a, calibrated=False)
        cal = table.predict(sp, a, calibrated=True) if table.calibration else None
        row = {"arch": str(a), "ofa": sp.to_ofa_dict(a), "raw_ms": raw, "calibrated_ms": cal,
               "predicted_ms": cal if cal is not None else raw}
        if breakdown:
            row["layers"] = [{"key": k, "ms": v} for k, v in table.breakdown(sp, a)]
        rows.append(row)
    result = {"lut": lut_path, "space": sp.name, "device": table.device.get("spec"),
              "stat": table.stat, "calibrated": table.calibration is not None,
              "predictions": rows}

    def human(r):
        lines = []
        for p in r["predictions"]:
            s = f"{p['predicted_ms']:.3f} ms  {p['arch']}"
            if p["calibrated_ms"] is not None:
                s += f"  (raw sum {p['raw_ms']:.3f} ms)"
            lines.append(s)
            for lay in p.get("layers", []):
                lines.append(f"    {lay['ms']:8.4f}  {lay['key']}")
        return "\n".join(lines)

    emit(result if len(rows) > 1 else {**result, **rows[0]}, as_json, human)


@lut.command("show")
@click.argument("lut_path", type=click.Path(dir_okay=False))
@json_option
@verbosity_option
def show_cmd(lut_path: str, as_json: bool) -> None:
    """Summarise a latency table (device, runtime, space, entries, calibration, range)."""
    from collections import Counter

    from nagkit.latency.keys import split_scope
    from nagkit.latency.table import LatencyTable

    table = LatencyTable.load(lut_path)
    s = table.summary()
    s["fidelity"] = table.provenance.get("fidelity")  # the held-out check of `--calibrate` / `lut calibrate`
    s["time_budget"] = table.provenance.get("time_budget")  # what `nagkit profile --time-budget` reached
    kinds = Counter(split_scope(k)[1].split("-")[0] for k in table.entries)
    s["entries_by_kind"] = dict(sorted(kinds.items()))
    try:
        sp = table.space()
        res = [r for r in table.resolutions if r in sp.resolutions]
        if res:
            sp = sp.replace(resolutions=tuple(res))
        s["missing_keys"] = len(table.missing_keys(sp))
        s["latency_range_ms"] = list(table.latency_range(sp)) if not s["missing_keys"] else None
    except Exception as e:  # noqa: BLE001 - an incomplete or foreign table still shows
        s["latency_range_ms"] = None
        s["range_error"] = str(e)

    def human(r):
        dev = r["device"]
        rt = r["runtime"]
        lines = [
            f"table      {r['path']}",
            f"space      {r['space']}   resolutions {r['resolutions']}",
            f"device     {dev.get('spec', '?')}  " + "  ".join(f"{k}={v}" for k, v in dev.items() if k != "spec"
                                                          and not isinstance(v, (dict, list)))[:200],
            f"runtime    " + "  ".join(f"{k}={v}" for k, v in rt.items() if not isinstance(v, (dict, list))),
            f"created    {r['created']}   stat {r['stat']}   precision {r.get('precision', 'fp32')}",
            f"entries    {r['n_entries']}  " + "  ".join(f"{k} {v}" for k, v in r["entries_by_kind"].items()),
        ]
        if r.get("latency_range_ms"):
            lo, hi = r["latency_range_ms"]
            lines.append(f"range      {lo:.3f} .. {hi:.3f} ms" + (" (calibrated)" if r["calibration"] else ""))
        else:
            lines.append(f"range      unavailable: {r.get('range_error') or 'the table is incomplete'}")
        if r.get("missing_keys"):
            lines.append(f"missing    {r['missing_keys']} block(s) of the space")
        c = r["calibration"]
        if c:
            lines.append(f"calibration {describe_calibration(c)}")
        else:
            lines.append("calibration none (predictions are raw block sums)")
        if r.get("time_budget"):
            from nagkit.latency.budget_text import budget_lines

            lines.extend(f"profile    {ln}" if i == 0 else ln for i, ln in enumerate(budget_lines(r["time_budget"])))
        if r.get("fidelity"):
            lines.append(f"fidelity   {describe_fidelity(r['fidelity'])}")
        return "\n".join(lines)

    emit(s, as_json, human)


def _parse_resolutions(text: str | None, space) -> list[int] | None:
    from nagkit.errors import BadInputError

    if not text:
        return None
    try:
        res = sorted({int(t) for t in text.replace(" ", "").split(",") if t})
    except ValueError:
        raise BadInputError(f"--resolutions {text!r} must be comma-separated integers, e.g. 224,192") from None
    bad = [r for r in res if r not in space.resolutions]
    if bad or not res:
        raise BadInputError(f"resolution(s) {bad or text!r} not in space {space.name!r}; allowed: "
                            f"{', '.join(map(str, space.resolutions))}")
    return res


def _resolutions_text(text: str | None) -> list[int] | None:
    from nagkit.errors import BadInputError

    if not text:
        return None
    try:
        return sorted({int(t) for t in text.replace(" ", "").split(",") if t})
    except ValueError:
        raise BadInputError(f"--resolutions {text!r} must be comma-separated integers, e.g. 224,192") from None


def _open_device(spec: str | None, table=None):
    from nagkit.devices.registry import get_device
    from nagkit.errors import BadInputError

    if not spec and table is not None and table.device.get("spec"):
        spec = table.device["spec"]
    if not spec:
        raise BadInputError("no device given", hint="pass --device, e.g. --device cpu (see `nagkit devices`)")
    return get_device(spec)


_FIT_DATA = ("fit_archs", "fit_raw_ms", "fit_measured_ms")


def _command_line() -> str:
    import shlex
    import sys

    return "nagkit " + " ".join(shlex.quote(a) for a in sys.argv[1:])


cache_option = click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                            help="Conversion cache (default ~/.cache/nagkit, or $NAGKIT_CACHE).")
jobs_option = click.option("--jobs", "-j", type=click.IntRange(1, 64), default=None,
                           help="Conversion processes (default: the usable cores). Conversions finish "
                                "before timing starts.")
progress_option = click.option("--progress/--no-progress", default=True, show_default=True,
                               help="Progress bar with ETA on stderr.")


class _NetworkCount(click.ParamType):
    """``--calibrate [N]``: a count of networks >= 0, or nothing (the flag alone: the default count)."""

    name = "N"

    def convert(self, value, param, ctx):
        if value is None or value == _DEFAULT_COUNT or isinstance(value, int):
            return value
        try:
            n = int(value)
        except (TypeError, ValueError):
            n = -1
        if n < 0:
            self.fail(f"{value!r} is not a number of networks; give N >= 0 (0: no calibration), or --calibrate "
                      "alone for the default count, e.g. `nagkit profile ... --calibrate`", param, ctx)
        return n


_DEFAULT_COUNT = "default"  # nagkit.app.profile.DEFAULT_COUNT (not imported: the CLI imports lazily)


@click.command("profile")
@device_option
@click.option("--space", "space_name", default=None,
              help="Search space name or JSON file (default: the default workspace's space, fmnist-mbv3-w0.5).")
@click.option("--resolutions", "res_text", default=None,
              help="Comma-separated resolutions to profile (default: all of the space's).")
@click.option("--out", "out", default=None, type=click.Path(dir_okay=False),
              help="Output table (JSON). Default: latency_tables/<model>-<runtime>-<space>.json (printed).")
@click.option("--benchmark-binary", "benchmark_binary", default=None, type=click.Path(dir_okay=False),
              help="Phones: TensorFlow Lite's benchmark_model for the phone (e.g. android_aarch64_benchmark_model), "
                   "pushed once. Default: the one already on the phone.")
@click.option("--resume", is_flag=True, help="Continue the journals beside --out; measure only what is missing.")
@click.option("--force", is_flag=True, help="Discard an existing journal and start over.")
@click.option("--calibrate", "n_cal", type=_NetworkCount(), default=None, is_flag=False, flag_value=_DEFAULT_COUNT,
              metavar="[N]",
              help="Then measure random whole networks and calibrate the table on them: N networks, or "
                   "without N the default count (80; the finer schemes are fitted only when the "
                   "networks suffice for them). Adopted only if it beats the raw block sum on held-out networks. "
                   "On this machine's CPU every block gets one more pass after the networks' conversions and one "
                   "after their passes, so that its passes span the whole profile.")
@seed_flag("--calibrate-seed", default=1, help="Seed of the calibration archs")
@click.option("--precision", default="fp32", show_default=True, metavar="fp32|int8|fp16",
              help="What the blocks (and calibration networks) are timed as: int8 quantizes each one as "
                   "`--export tflite-int8`/`onnx-int8` does, fp16 (tflite devices) stores its weights float16 as "
                   "`--export tflite-fp16` does; the table records it and predicts only bundles of that precision.")
@click.option("--block-passes", "block_passes", type=click.IntRange(1, 20), default=None, metavar="N",
              help="Measure every block in N passes over the list and keep its best pass (load elsewhere only "
                   "slows a run down); blocks whose best no other pass confirms within 3% get up to 4 more. "
                   "Default: 3 on this machine's CPU, 1 on a phone.")
@click.option("--time-budget", "time_budget", default=None, metavar="DURATION",
              help="The time the whole profile keeps to, calibration included: 10m, 90s, 1h30m or seconds. "
                   "Conversions and one pass over the blocks are required (a budget below them is refused "
                   "before anything is written, naming the minimum); further passes and calibration networks "
                   "run while the time left allows, those that move typical networks' predictions most first. "
                   "Default: 10m on this machine's CPU, none on a phone or GPU; `none`: no budget.")
@cache_option
@jobs_option
@progress_option
@json_option
@verbosity_option
def profile(device_spec, space_name, res_text, out, benchmark_binary, resume, force, n_cal, calibrate_seed,
            precision, block_passes, time_budget, cache_dir, jobs, progress, as_json) -> None:
    """Measure every unique block of a space on a device into a latency table (resumable).

    The device is contacted first (a missing phone or benchmark_model fails in seconds); on a
    phone the host converts blocks while the phone measures those already converted."""
    from nagkit.app.profile import ProfileOptions, run_profile
    from nagkit.cli.options import log
    from nagkit.latency.budget_text import parse_time_budget

    budget = "default" if time_budget is None else parse_time_budget(time_budget)  # bad: one line, exit 2
    if budget is None:
        budget = "none"

    def started(path, facts, sp, res) -> None:
        from nagkit.latency.blocks import unique_layers

        from nagkit.devices.cpuinfo import named_cpu

        what = " ".join(str(v) for v in (facts.get("model") or named_cpu(facts), facts.get("os")) if v)
        via = f", via {facts['transport']}" if facts.get("transport") else ""
        log(f"device   {device_spec}" + (f" ({what}{via})" if what or via else "") + ": reachable, ready to measure")
        log(f"space    {sp.name}" + (" (the default workspace's; --space to change)" if space_name is None else "")
            + f", resolutions {','.join(map(str, res))}: {len(unique_layers(sp, res))} unique blocks")
        log(f"table    {path}" + (f" ({precision})" if precision != "fp32" else ""))

    result, table, cal_result = run_profile(device_spec, ProfileOptions(
        space=space_name, resolutions=_resolutions_text(res_text), out=out, benchmark_binary=benchmark_binary,
        resume=resume, force=force, cache_dir=cache_dir, jobs=jobs, progress=progress, calibrate=n_cal, calibrate_seed=calibrate_seed,
        precision=precision, block_passes=block_passes, command=_command_line(), time_budget=budget),
        on_start=started)
    d = result.to_dict()
    d["calibration"] = table.calibration.to_dict() if table.calibration else None
    if d["calibration"]:
        d["calibration"] = {k: v for k, v in d["calibration"].items() if k not in _FIT_DATA}
    if cal_result is not None:
        d["fidelity"] = cal_result.record
        d["calibration_summary"] = cal_result.summary()

    def human(r):
        prec = f"{r['precision']} " if r["precision"] != "fp32" else ""
        lines = [f"profiled {r['entries']} {prec}blocks of {r['space']} at {r['resolutions']} on {r['device']} "
                 f"({r['measured']} measured, {r['resumed']} from the journal) in {r['elapsed_s']:.1f} s "
                 f"-> {r['out']}"]
        bp = r.get("passes") or {}
        if bp.get("passes", 0) > 1:
            nz = bp.get("noise") or {}
            sd = nz.get("best_of_sd_pct")
            lines.append(f"blocks: best of {bp['passes']} passes; one pass varies by "
                         f"{nz.get('single_measurement_sd_pct') or 0:.2f}% (sd), the best by "
                         f"{sd or 0:.2f}%; {len(bp.get('unconfirmed_blocks') or [])} block(s) unconfirmed within 3%")
        if r["noisy"]:
            lines.append(f"warning: {len(r['noisy'])} block(s) stayed noisy (IQR/median above target)")
        if r.get("time_budget"):
            from nagkit.latency.budget_text import budget_lines

            lines.extend(budget_lines(r["time_budget"]))
        c = r["calibration"]
        if c:
            lines.append(f"calibration: {describe_calibration(c)}")
        if r.get("calibration_summary"):
            lines.append(r["calibration_summary"])
        export = "tflite" if r["precision"] == "fp32" else f"tflite-{r['precision']}"
        lines.append(f"next: nagkit build --budget B --export {export} --device {r['device']} "
                     "(with this table in the workspace's nagkit.toml)")
        return "\n".join(lines)

    emit(d, as_json, human)
    _warn_fidelity(d.get("fidelity"))


group_by_option = click.option("--group-by", type=click.Choice(["auto", "global", "kind", "kind-in", "kind-in-k"]),
                               default="auto", show_default=True,
                               help="Calibration model: one scale and offset (global), or a factor per block "
                                    "kind / input size / kernel; auto keeps, among the schemes the networks "
                                    "suffice for, the one with the lowest leave-one-out error.")
shrinkage_option = click.option("--shrinkage", type=POSITIVE, default=None,
                                help="Pull of each group's factor toward the global scale, in networks "
                                     "(default 1).")


@lut.command("calibrate")
@lut_option
@device_option
@click.option("--samples", "n", type=BoundedInt(1, 100_000), default=None,
              help="Random whole networks to measure and fit on, 1..100,000 (default: 80, or what a --group-by scheme "
                   "needs when more; fewer than a scheme needs is refused, "
                   "or with --group-by auto the finer schemes are left out).")
@click.option("--resolutions", "res_text", default=None, help="Resolutions to sample (default: the table's).")
@seed_flag("--exclude-seed", default=None,
           help="Leave out the networks `nagkit lut validate --seed S` measures (up to 1000 samples), "
                "so calibration and validation sets are disjoint")
@click.option("--refit", is_flag=True,
              help="Measure nothing: refit from the networks the table's calibration lists.")
@click.option("--out", "out", default=None, type=click.Path(dir_okay=False),
              help="Write the calibrated table here (default: update --lut in place, atomically).")
@group_by_option
@shrinkage_option
@seed_flag(default=1, help="Seed of the calibration archs (validate's default is 0: different networks)")
@cache_option
@jobs_option
@progress_option
@json_option
@verbosity_option
def calibrate_cmd(lut_path, device_spec, n, res_text, exclude_seed, refit, out, group_by, shrinkage, seed,
                  cache_dir, jobs, progress, as_json) -> None:
    """Calibrate the table on N measured random whole networks: measured ≈ intercept +
    Σ_g factor_g × (table latency of the arch's blocks in group g), the scheme with the lowest
    held-out (leave-one-out) error, adopted only if it beats the raw block sum there."""
    from nagkit.latency.calibration import DEFAULT_SHRINKAGE, refit_result
    from nagkit.latency.table import LatencyTable
    from nagkit.latency.validate import calibrate, random_archs

    table = LatencyTable.load(lut_path)
    sp = table.space()
    res = _parse_resolutions(res_text, sp)
    if refit:
        result = refit_result(table, sp, group_by=group_by,
                              shrinkage=DEFAULT_SHRINKAGE if shrinkage is None else shrinkage)
    else:
        exclude = []
        if exclude_seed is not None:  # archs are drawn in sequence: the first 1000 cover any validate run
            exclude = random_archs(sp, max(n or 0, 1000), exclude_seed,
                                   res or [r for r in table.resolutions if r in sp.resolutions])
        dev = _open_device(device_spec, table)
        try:
            result = calibrate(table, dev, sp, n, seed=seed, resolutions=res, cache_dir=cache_dir,
                               progress=progress, jobs=jobs, exclude=exclude, group_by=group_by, shrinkage=shrinkage)
        finally:
            dev.close()
    new = result.apply(table)
    path = new.save(out or lut_path)
    c = {k: v for k, v in result.candidate.to_dict().items() if k not in _FIT_DATA}
    emit({"out": str(path), "adopted": result.adopted, "fidelity": result.record, **c}, as_json,
         lambda r: f"{result.summary()}\ncalibration: {describe_calibration(r)}"
                   f"{'' if r['adopted'] else ' (not adopted)'} -> {r['out']}")
    _warn_fidelity(result.record)


def _warn_fidelity(rec: dict | None) -> None:
    """A one-line warning on stderr when ±5% is not reached (the details are in the result)."""
    import logging

    if rec and rec.get("verdict") and not rec["verdict"]["meets_5pct"]:
        logging.getLogger("nagkit.latency").warning("%s", rec["verdict"]["text"])


@lut.command("validate")
@lut_option
@device_option
@click.option("--samples", "n", type=BoundedInt(1, 100_000), default=20, show_default=True,
              help="Random whole networks to measure (1..100,000).")
@click.option("--resolutions", "res_text", default=None, help="Resolutions to sample (default: the table's).")
@click.option("--plot", "plot", default=None, type=click.Path(dir_okay=False), help="Write a scatter plot (PNG).")
@click.option("--min-within-5", type=FINITE, default=None,
              help="Exit 1 unless at least this fraction is within ±5% (calibrated when available).")
@click.option("--anchors", type=click.IntRange(min=0), default=10, show_default=True,
              help="The table's own calibration networks to measure again, in the same passes: has the "
                   "machine's speed moved since the table was made? 0: none.")
@click.option("--time-budget", "time_budget", default=None, metavar="DURATION",
              help="The time the validation keeps to: 10m, 90s, 1h30m or seconds. Converting the networks and "
                   "measuring each once are required (a budget below them is refused before any conversion, "
                   "naming the minimum); further passes run while the time left allows. Default: none (the "
                   "plan and its estimate are said before any work).")
@seed_option
@cache_option
@jobs_option
@progress_option
@json_option
@verbosity_option
def validate_cmd(lut_path, device_spec, n, res_text, plot, min_within_5, anchors, time_budget, seed, cache_dir, jobs,
                 progress, as_json) -> None:
    """Measure N random whole networks end to end and compare them with the table's predictions."""
    from nagkit.errors import CheckFailedError
    from nagkit.latency.budget import TimeBudget
    from nagkit.latency.budget_text import parse_time_budget
    from nagkit.latency.table import LatencyTable
    from nagkit.latency.validate import plot_scatter, report_text, validate

    budget = TimeBudget(None if time_budget is None else parse_time_budget(time_budget))  # bad: one line, exit 2
    table = LatencyTable.load(lut_path)
    sp = table.space()
    res = _parse_resolutions(res_text, sp)
    dev = _open_device(device_spec, table)
    try:
        rep = validate(table, dev, sp, n, seed=seed, resolutions=res, cache_dir=cache_dir, progress=progress,
                       jobs=jobs, anchors=anchors, budget=budget)
    finally:
        dev.close()
    if plot:
        rep["plot"] = str(plot_scatter(rep, plot))

    emit(rep, as_json, report_text)
    _warn_fidelity(rep)
    if min_within_5 is not None:
        m = rep["calibrated"] or rep["raw"]
        if m["within_5pct"] < min_within_5:
            raise CheckFailedError(f"only {m['within_5pct']:.0%} of {rep['samples']} networks are within ±5% "
                                   f"(required {min_within_5:.0%})",
                                   hint="re-calibrate with `nagkit lut calibrate`, or re-profile on a quiet machine")
