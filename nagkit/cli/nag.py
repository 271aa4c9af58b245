"""`nagkit dataset | train | generate | search | compare`: the NAG workflow on a workspace."""

from __future__ import annotations

import click

from nagkit.cli.options import emit, json_option, log, verbosity_option, workspace_option


def _progress(*tasks: tuple[str, int]):
    """Rich progress bars on stderr: returns (context manager, one update(done, total, value)
    callback per task)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    prog = Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=Console(stderr=True))
    updates = []
    for label, total in tasks:
        task = prog.add_task(label, total=total, info="")

        def update(done: int, tot: int, value: float | None = None, _task=task) -> None:
            prog.update(_task, completed=done, total=tot, info="" if value is None else f"{value:.4g}")

        updates.append(update)
    return prog, *updates


def _parse_budgets(values: tuple[str, ...]) -> list[float]:
    from nagkit.errors import BadInputError

    out: list[float] = []
    for v in values:
        for part in str(v).replace(",", " ").split():
            try:
                out.append(float(part))
            except ValueError:
                raise BadInputError(f"budget {part!r} is not a number of milliseconds (e.g. --budget 30)") from None
    if not out:
        raise BadInputError("give at least one budget, e.g. --budget 30")
    return out


@click.command()
@workspace_option
@click.option("--n", "n", type=int, default=None, help="Number of architectures (default: the workspace's dataset.n).")
@click.option("--seed", type=int, default=None, help="Sampling seed (default: the workspace's).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Output JSONL (default: the workspace's dataset artifact). An existing partial file is resumed.")
@json_option
@verbosity_option
def dataset(workspace, n, seed, out, as_json):
    """Sample architectures uniformly with table latency and source accuracy (resumable)."""
    from pathlib import Path

    from nagkit.data.dataset import collect, rows_done
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    n = n if n is not None else ws.dataset_settings.n
    seed = seed if seed is not None else ws.dataset_settings.seed
    path = Path(out) if out else ws.artifact_path("dataset")
    done = rows_done(path)
    if done:
        log(f"resuming {path}: {done} rows already collected")
    table, source = ws.latency_table, ws.open_accuracy_source()
    prog, update = _progress(("dataset", n))
    with prog:
        ds = collect(path, space=ws.space, table=table, source=source, n=n, seed=seed,
                     table_prov=ws.latency_table_provenance(), progress=lambda d, t: update(d, t))
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
    """Train the evaluator, then the budget-conditioned generator; save both."""
    from pathlib import Path

    import torch

    from nagkit.data.accuracy import file_sha256
    from nagkit.data.dataset import load_dataset
    from nagkit.nag.config import config_to_dict
    from nagkit.nag.train import save_archive, save_model, train_models
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    path = Path(dataset_path) if dataset_path else ws.require_artifact("dataset")
    ds = load_dataset(path, space=ws.space)
    ec, gc = ws.evaluator_config, ws.generator_config
    source = ws.open_accuracy_source() if gc.refine_rounds > 0 else None
    torch.manual_seed(ws.seed)
    prog, ue, ug = _progress(("evaluator", ec.epochs), ("generator", gc.steps))
    with prog:
        ev, gen, report = train_models(ws.space, ws.latency_table, ds.archs, ds.latency_ms, ds.accuracy,
                                       budgets=ws.budgets, evaluator_cfg=ec, generator_cfg=gc, source=source,
                                       progress_eval=ue, progress_gen=ug, log=log)
    prov = {"workspace": ws.name, "dataset": str(path), "dataset_sha256": file_sha256(path),
            "dataset_rows": len(ds), "dataset_header": {k: ds.header.get(k) for k in ("space", "seed", "accuracy_source")},
            "latency_table": ws.latency_table_provenance(), "seed": ws.seed,
            "budgets": config_to_dict(ws.budgets),
            "accuracy_queries": {"dataset": len(ds), "refinement": report["refinement_queries"]}}
    save_model(ws.artifact_path("evaluator"), ev, prov, report["evaluator"])
    save_model(ws.artifact_path("generator"), gen, prov, {**report["generator"], "refinement": report["refinement"]})
    if report.get("archive") is not None:
        save_archive(ws, report["archive"], source, prov)
    hold = report["evaluator"].get("holdout", {})
    result = {"evaluator": str(ws.artifact_path("evaluator")), "generator": str(ws.artifact_path("generator")),
              "grid_ms": report["grid_ms"], "seconds": report["seconds"], "holdout": hold,
              "refinement_queries": report["refinement_queries"],
              "final_reward": report["generator"]["history"][-1]["reward"]}
    emit(result, as_json, lambda r: "\n".join([
        f"evaluator  {r['evaluator']}",
        f"generator  {r['generator']}",
        f"budgets    {r['grid_ms'][0]:.2f}..{r['grid_ms'][-1]:.2f} ms ({len(r['grid_ms'])} grid budgets)",
        f"held-out   pairwise accuracy {hold.get('mean_pairwise_accuracy', float('nan')):.3f}, "
        f"Kendall tau {hold.get('mean_kendall_tau', float('nan')):.3f}",
        f"time       {r['seconds']:.1f} s" + (f" (+{r['refinement_queries']} refinement queries)"
                                             if r['refinement_queries'] else ""),
    ]))


@click.command()
@workspace_option
@click.option("--budget", "-b", "budgets", multiple=True, required=True, help="Latency budget in ms (repeatable).")
@click.option("--samples", type=int, default=None, help="Samples per budget (default: the workspace's).")
@click.option("--rerank", "rerank", type=int, default=None, is_flag=False, flag_value=20,
              help="Re-rank the evaluator's top N feasible candidates with the accuracy source "
                   "(`--rerank` alone: 20; default: the workspace's).")
@click.option("--search-queries", "search_queries", type=click.IntRange(min=0), default=None,
              help="Cap on accuracy-source queries per budget of the source-guided local search after "
                   "re-ranking (0: off; default: the workspace's [inference] search_queries).")
@click.option("--top", type=int, default=5, show_default=True, help="Candidates listed per budget.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@json_option
@verbosity_option
def generate(workspace, budgets, samples, rerank, search_queries, top, seed, as_json):
    """The best architecture for each budget (ranked candidates; one batch for all budgets)."""
    from nagkit.nag.infer import generate as run_generate
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    results = run_generate(ws, _parse_budgets(budgets), samples=samples, rerank=rerank, seed=seed, top=top,
                           search_queries=search_queries)
    sp = ws.space
    payload = {"workspace": ws.name, "space": sp.name, "results": [r.to_dict(sp, top=top) for r in results]}

    def human(p):
        import json

        lines = []
        for r in results:
            b = r.best
            acc = f"{b.accuracy * 100:.2f}% ({r.accuracy_source})" if b.accuracy is not None else "n/a"
            lines += [f"budget {r.budget_ms:g} ms",
                      f"  arch      {b.arch}",
                      f"  ofa       {json.dumps(sp.to_ofa_dict(b.arch))}",
                      f"  latency   {b.latency_ms:.2f} ms (latency table)",
                      f"  accuracy  {acc}",
                      f"  feasible  {r.n_feasible}/{r.n_sampled} samples, {r.extra.get('unique_feasible', len(r.candidates))} unique within budget; "
                      f"{r.queries} accuracy queries; {r.seconds * 1000:.0f} ms"]
        return "\n".join(lines)

    emit(payload, as_json, human)


@click.command()
@workspace_option
@click.option("--budget", "-b", "budget", type=float, required=True, help="Latency budget in ms.")
@click.option("--method", "-m", default="evolution", show_default=True,
              help="evolution, random, mnasnet, tunas or nsga2.")
@click.option("--queries", type=int, default=None, help="Stop after N accuracy-source queries.")
@click.option("--steps", type=int, default=None, help="Stop after N ask/tell steps (default: the method's schedule).")
@click.option("--time-limit", type=float, default=None, help="Stop after S seconds.")
@click.option("--patience", type=int, default=None, help="Stop after N steps without improvement.")
@click.option("--seed", type=int, default=0, show_default=True)
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
    lo, hi = table.latency_range(ws.space)
    if not lo <= budget:
        from nagkit.nag.budgets import BudgetOutOfRangeError

        raise BudgetOutOfRangeError(f"budget {budget:g} ms is below the fastest architecture of the table "
                                    f"({lo:.2f} ms); feasible range {lo:.2f}..{hi:.2f} ms",
                                    hint=f"pass --budget >= {lo:.2f}")
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
@click.option("--seeds", type=int, default=1, show_default=True, help="Independent runs per baseline (mean reported).")
@click.option("--rerank", type=int, default=None, help="NAG: re-rank the top N with the accuracy source.")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write the Pareto-frontier plot and latency histograms here.")
@click.option("--hist-budget", type=float, default=None, help="Budget of the latency histogram (default: the median budget).")
@json_option
@verbosity_option
def compare(workspace, budgets, methods, queries, seeds, rerank, plot_dir, hist_budget, as_json):
    """Compare NAG with the baselines: accuracy (from the accuracy source), latency,
    feasibility of 1,000 samples, time, queries, hypervolume; optional plots."""
    from nagkit.search.compare import format_report, run_compare
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    meths = [m.strip() for m in methods.split(",") if m.strip()]
    report = run_compare(ws, _parse_budgets(budgets), meths, queries=queries, seeds=seeds, rerank=rerank,
                         plot_dir=plot_dir, hist_budget=hist_budget, log=log)
    emit(report, as_json, format_report)
