"""`nagkit dataset | train | generate | search | compare`: the NAG workflow on a workspace."""

from __future__ import annotations

import click

from nagkit.cli.options import (FINITE, POSITIVE, BoundedInt, emit, json_option, limit_lines, limit_options, log,
                                samples_flag, seed_flag, verbosity_option, workspace_option)
from nagkit.nag.config import DATASET_N_MAX


def _parse_budgets(values: tuple[str, ...]) -> list[float]:
    import math

    from nagkit.errors import BadInputError, short_repr

    out: list[float] = []
    for v in values:
        for part in str(v).replace(",", " ").split():
            try:
                out.append(float(part))
            except ValueError:
                raise BadInputError(f"budget {short_repr(part)} is not a number of milliseconds (e.g. --budget 30)") from None
            if not math.isfinite(out[-1]):
                raise BadInputError(f"budget {short_repr(part)} is not a finite number of milliseconds "
                                    "(e.g. --budget 30)")
    if not out:
        raise BadInputError("give at least one budget, e.g. --budget 30")
    return out


@click.command()
@workspace_option
@click.option("--n", "n", type=BoundedInt(1, DATASET_N_MAX), default=None,
              help=f"Number of architectures, 1..{DATASET_N_MAX:,} (default: the workspace's dataset.n).")
@seed_flag(default=None, help="Sampling seed (default: the workspace's)")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Output JSONL (default: the workspace's dataset artifact). An existing partial file is resumed.")
@json_option
@verbosity_option
def dataset(workspace, n, seed, out, as_json):
    """Sample architectures uniformly with table latency and source accuracy (resumable)."""
    from pathlib import Path

    from nagkit.app.workspace import load_workspace, writable_workspace
    from nagkit.data.dataset import collect, rows_done
    from nagkit.progress import phase_progress

    ws = load_workspace(workspace)
    if out is None:
        ws = writable_workspace(ws, "nagkit dataset")
    n = n if n is not None else ws.dataset_settings.n
    seed = seed if seed is not None else ws.dataset_settings.seed
    path = Path(out) if out else ws.artifact_path("dataset")
    done = rows_done(path)
    if done:
        log(f"resuming {path}: {done} rows already collected")
    table, source = ws.latency_table, ws.open_accuracy_source()
    update = phase_progress()
    ds = collect(path, space=ws.space, table=table, source=source, n=n, seed=seed,
                 table_prov=ws.latency_table_provenance(), progress=lambda d, t: update("dataset", d, t))
    lo, hi = ds.latency_range
    result = {"path": str(path), "rows": len(ds), "resumed_from": done, "seed": seed,
              "accuracy_source": source.provenance(), "accuracy_queries": source.queries,
              "latency_range_ms": [lo, hi], "accuracy_range": [float(ds.accuracy.min()), float(ds.accuracy.max())]}
    emit(result, as_json, lambda r: (
        f"dataset  {r['path']}\nrows     {r['rows']} (resumed from {r['resumed_from']})\n"
        f"latency  {lo:.2f}..{hi:.2f} ms\naccuracy {r['accuracy_range'][0] * 100:.2f}..{r['accuracy_range'][1] * 100:.2f}% "
        f"({source.name})"))


@click.command()
@workspace_option
@click.option("--dataset", "dataset_path", type=click.Path(dir_okay=False), default=None,
              help="Dataset JSONL (default: the workspace's).")
@json_option
@verbosity_option
def train(workspace, dataset_path, as_json):
    """Frontier search, evaluator and generator (all accuracy queries counted); save them."""
    from nagkit.app.nag import train_workspace
    from nagkit.app.workspace import load_workspace, writable_workspace
    from nagkit.cli.options import phase_progress

    ws = writable_workspace(load_workspace(workspace), "nagkit train")
    r = train_workspace(ws, dataset_path, progress=phase_progress(), log=log)
    hold = r["holdout"]
    q = r["accuracy_queries"]

    def human(r) -> str:
        fit = r["frontier_fit"]
        quality = (f"surrogate  {fit.get('mae_points', float('nan')):.3f} points mean error on the frontier archive"
                   if r["evaluator_kind"] == "surrogate" else
                   f"held-out   Kendall tau {hold.get('mean_kendall_tau', float('nan')):.3f}, "
                   f"among feasible {hold.get('mean_kendall_tau_feasible', float('nan')):.3f}")
        carried = f", {q['carried']} carried over from another table" if q["carried"] else ""
        explored = r["frontier_search"].get("explore_queries", 0)
        explored = f", {explored} of them on the most capable archs (decisions 53)" if explored else ""
        return "\n".join([
            f"evaluator  {r['evaluator']} ({r['evaluator_kind']})",
            f"generator  {r['generator']}",
            f"archive    {r['archive']} ({r['archive_rows']} archs)",
            f"journal    {r['queries_journal']}",
            f"budgets    {r['range_ms'][0]:.3g}..{r['range_ms'][1]:.3g} ms (the space's range on the table)",
            f"queries    {q['new']} new this run (frontier search {q['frontier_search']}{explored}, refinement "
            f"{q['refinement']}); {q['total']} accuracies in all ({q['dataset']} dataset{carried}); "
            f"{q['for_this_table']} of this table's budget of {q['budget']} spent",
            quality,
            f"time       {r['seconds']:.1f} s",
        ])

    emit(r, as_json, human)


@click.command()
@workspace_option
@click.option("--budget", "-b", "budgets", multiple=True, help="Latency budget in ms (repeatable; or --sweep).")
@samples_flag()
@click.option("--search-queries", "search_queries", type=click.IntRange(min=0), default=None,
              help="Also run the accuracy-guided local search, at most N accuracy-source queries per budget "
                   "(default 0: zero-query generation).")
@click.option("--no-accuracy", "no_accuracy", is_flag=True,
              help="Do not query the accuracy source to display the chosen arch's accuracy.")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True, help="Candidates listed per budget.")
@limit_options
@click.option("--sweep", type=BoundedInt(2, 100), default=None, metavar="N",
              help="Instead of --budget: N budgets from the fastest network the limits admit to the slowest, the best "
                   "arch for each with the limits and without them (the accuracy frontier over latency).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="With --sweep: write the two frontiers to this PNG.")
@seed_flag(help="Sampling seed")
@json_option
@verbosity_option
def generate(workspace, budgets, samples, search_queries, no_accuracy, top, max_params, max_size_mb, max_macs,
             max_peak_kb, sweep, plot_path, seed, as_json):
    """The best architecture for each budget. By default the generator alone chooses it
    (zero accuracy-source queries, `selection_queries` in --json); each budget is generated
    on its own, from (seed, budget). --max-params/--max-size-mb/--max-macs/--max-peak-kb: every
    sample also meets these (the file and activations: a TFLite export at the table's precision)."""
    from nagkit.app.nag import generate as run_generate
    from nagkit.app.workspace import load_workspace
    from nagkit.nag.constraints import Limits

    limits = Limits.parse(max_params=max_params, max_size_mb=max_size_mb, max_macs=max_macs, max_peak_kb=max_peak_kb)
    if sweep is not None or plot_path is not None:
        return _sweep(workspace, sweep, plot_path, budgets, search_queries, limits, samples, seed, no_accuracy, as_json)
    budget_list = _parse_budgets(budgets)
    ws = load_workspace(workspace)
    results = run_generate(ws, budget_list, samples=samples, seed=seed, top=top,
                           search_queries=search_queries, display=not no_accuracy, limits=limits)
    sp = ws.space
    import logging

    from nagkit.latency.table_fidelity import fidelity_line, table_fidelity

    tf = table_fidelity(ws.table_origin()[1])  # what the table's profile reached under its time budget
    for w in (tf or {}).get("warnings", []):
        logging.getLogger("nagkit.latency").warning("%s", w)
    payload = {"workspace": ws.name, "space": sp.name, "results": [r.to_dict(sp, top=top) for r in results],
               "table_fidelity": tf}

    def human(p):
        import json

        lines = [f"table      {ws.latency_table_spec}: {fidelity_line(tf)}"] if tf else []
        for r in results:
            b = r.best
            acc = f"{b.accuracy * 100:.2f}% ({r.accuracy_source}, display only)" if b.accuracy is not None else "n/a"
            lines += [f"budget {r.budget_ms:g} ms"]
            if r.note:
                lines.append(f"  note      {r.note}")
            lines += [f"  arch      {b.arch}",
                      f"  ofa       {json.dumps(sp.to_ofa_dict(b.arch))}",
                      f"  latency   {b.latency_ms:.3f} ms (latency table)",
                      *limit_lines(r.extra.get("constraints"), indent="  "),
                      f"  accuracy  {acc}",
                      f"  chosen    from {r.n_unique} unique samples of {r.n_sampled}; {r.selection_queries} "
                      f"accuracy queries to choose; {r.seconds * 1000:.0f} ms"]
        return "\n".join(lines)

    emit(payload, as_json, human)


def _sweep(workspace, n, plot_path, budgets, search_queries, limits, samples, seed, no_accuracy, as_json) -> None:
    """`generate --sweep N [--plot PNG]`: both frontiers, as a table (or JSON) and a plot."""
    from nagkit.errors import BadInputError

    if n is None:
        raise BadInputError("--plot goes with --sweep N", hint="e.g. nagkit generate --sweep 8 --max-params 700K "
                                                               "--plot frontier.png")
    if budgets or search_queries:
        raise BadInputError("--sweep chooses its own budgets and queries nothing: drop "
                            + ("--budget" if budgets else "--search-queries"))
    from nagkit.app.sweep import plot_sweep, sweep

    res = sweep(workspace, n, limits, samples=samples, seed=seed, display=not no_accuracy)
    if plot_path is not None:
        res["plot"] = str(plot_sweep(res, plot_path))

    def human(r) -> str:
        lines = [f"{r['workspace']}: the best arch per budget, latency only and with "
                 + ", ".join(f"{k} {v:g}" for k, v in r["limits"].items() if v is not None)]
        for name, rows in r["curves"].items():
            lines += [f"{name}:", "  budget ms  latency ms  accuracy  score    params      MACs  peak kB  binding"]
            for x in rows:
                acc = f"{100 * x['accuracy']:.2f}%" if x["accuracy"] is not None else "n/a"
                peak = f"{x['peak_kb']:.1f}" if x["peak_kb"] is not None else "n/a"
                lines.append(f"  {x['budget_ms']:9.4g}  {x['latency_ms']:10.4g}  {acc:>8}  {x['evaluator_score']:5.2f}"
                             f"  {x['params']:>8,}  {x['macs']:>10,}  {peak:>7}  {x['binding']}")
        return "\n".join(lines + ([f"plot     {r['plot']}"] if r.get("plot") else []))

    emit(res, as_json, human)


@click.command()
@workspace_option
@click.option("--budget", "-b", "budget", type=FINITE, required=True, help="Latency budget in ms.")
@click.option("--method", "-m", default="evolution", show_default=True,
              help="evolution, random, mnasnet, tunas or nsga2.")
@click.option("--queries", type=int, default=None, help="Stop after N accuracy-source queries.")
@click.option("--steps", type=int, default=None, help="Stop after N ask/tell steps (default: the method's schedule).")
@click.option("--time-limit", type=POSITIVE, default=None, help="Stop after S seconds.")
@click.option("--patience", type=int, default=None, help="Stop after N steps without improvement.")
@seed_flag()
@json_option
@verbosity_option
def search(workspace, budget, method, queries, steps, time_limit, patience, seed, as_json):
    """Run one baseline search for one budget (accuracy from the workspace's source)."""
    import json

    from nagkit.search.base import Plateau, SearchProblem, Steps, TimeLimit, run_search
    from nagkit.search.factory import make_method
    from nagkit.search.methods import default_stop
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    table = ws.latency_table
    from nagkit.nag.budgets import check_budget

    lo, hi = table.latency_range(ws.space)
    check_budget(budget, lo, hi)
    prob = SearchProblem(ws.space, table, ws.open_accuracy_source(), budget)
    m = make_method(method, prob, seed)
    stop = Steps(steps) if steps else default_stop(method)
    if queries:
        from nagkit.search.base import QueryBudget

        stop = stop | QueryBudget(queries)
    if time_limit:
        stop = stop | TimeLimit(time_limit)
    if patience:
        stop = stop | Plateau(patience)
    res = run_search(m, stop)
    out = res.to_dict(ws.space)
    emit(out, as_json, lambda r: "\n".join([
        f"method    {r['method']}  budget {budget:g} ms",
        f"arch      {r['arch']}",
        f"ofa       {json.dumps(r['ofa'])}",
        f"latency   {r['latency_ms']:.2f} ms (latency table)",
        f"accuracy  {r['accuracy'] * 100:.2f}% ({prob.source.name})",
        f"cost      {r['accuracy_queries']} accuracy queries, {r['steps']} steps, {r['seconds']:.2f} s",
    ]))


@click.command()
@workspace_option
@click.option("--budgets", "budgets", multiple=True, required=True, help="Budgets in ms (comma-separated or repeated).")
@click.option("--methods", default="nag,evolution,random,mnasnet,tunas,nsga2", show_default=True,
              help="Comma-separated methods.")
@click.option("--queries", type=int, default=None,
              help="Accuracy-source queries per budget for the baselines (default: each method's full schedule).")
@click.option("--seeds", type=BoundedInt(1, 1000), default=1, show_default=True,
              help="Independent runs per baseline, 1..1000 (mean reported).")
@click.option("--search-queries", "search_queries", type=click.IntRange(min=0), default=None,
              help="NAG: also run the accuracy-guided search, at most N queries per budget (default 0).")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write the Pareto-frontier plot and latency histograms here.")
@click.option("--hist-budget", type=FINITE, default=None, help="Budget of the latency histogram (default: the median budget).")
@json_option
@verbosity_option
def compare(workspace, budgets, methods, queries, seeds, search_queries, plot_dir, hist_budget, as_json):
    """Compare NAG with the baselines: accuracy (from the accuracy source), latency,
    feasibility of 1,000 samples, time, queries, hypervolume; optional plots."""
    from nagkit.search.compare import format_report, run_compare
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    meths = [m.strip() for m in methods.split(",") if m.strip()]
    report = run_compare(ws, _parse_budgets(budgets), meths, queries=queries, seeds=seeds, search_queries=search_queries,
                         plot_dir=plot_dir, hist_budget=hist_budget, log=log)
    emit(report, as_json, format_report)
