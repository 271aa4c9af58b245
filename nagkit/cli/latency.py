"""`nagkit profile` and `nagkit lut {import-ofa,predict,show,calibrate,validate}`."""

from __future__ import annotations

import click

from nagkit.cli.options import device_option, emit, json_option, seed_option, verbosity_option

lut_option = click.option("--lut", "lut_path", required=True, type=click.Path(dir_okay=False),
                          help="Latency table (JSON).")


def _space_for(table, space_name: str | None):
    from nagkit.space import get_space

    if space_name:
        return get_space(space_name)
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
    from nagkit.space import get_space

    sp = get_space(space_name)
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
            f"created    {r['created']}   stat {r['stat']}",
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
            lines.append(f"calibration measured ≈ {c['scale']:.4f} × sum + {c['offset']:.4f} ms "
                         f"(fit MAPE {c['fit_error']:.2f}% on {c['n_fit']} networks)")
        else:
            lines.append("calibration none (predictions are raw block sums)")
        return "\n".join(lines)

    emit(s, as_json, human)


@click.command("profile")
def profile() -> None:
    """Measure a device block by block into a latency table (being built)."""
    from nagkit.errors import NagkitError

    raise NagkitError("`nagkit profile` is not available yet in this build")
