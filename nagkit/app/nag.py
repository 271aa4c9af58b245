"""The NAG workflow on a workspace: train its models, generate for budgets.

`nagkit train` and `nagkit generate` (and the Python API) call these; the CLI only parses
and prints. Training counts every accuracy-source query (the dataset's and the frontier
search's) and records them in the artifacts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError

Progress = Callable[[str, int, int], None]


def train_workspace(workspace, dataset_path: str | Path | None = None, progress: Progress | None = None,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Frontier search, evaluator and generator for ``workspace``'s dataset; writes the
    evaluator, archive and generator artifacts (atomically, evaluator first). Returns a summary."""
    from nagkit.app.workspace import load_workspace
    from nagkit.io import exclusive_lock

    ws = load_workspace(workspace)
    path = Path(dataset_path) if dataset_path else ws.require_artifact("dataset")
    evaluator = ws.artifact_path("evaluator")
    evaluator.parent.mkdir(parents=True, exist_ok=True)
    # One `nagkit train` per workspace at a time (issue 13 D7): a second one is refused at once
    # instead of both training and both reporting success over each other's artifacts.
    lock = evaluator.with_name(f".{evaluator.name}.lock")
    with exclusive_lock(lock,
                        message=f"another `nagkit train` is training workspace {ws.name!r} right now "
                                f"(it holds {str(lock)!r})",
                        hint="wait for it to finish (or stop it), then rerun `nagkit train`"):
        return _train_locked(ws, path, progress, log)


def _train_locked(ws, path: Path, progress: Progress | None, log: Callable[[str], None] | None) -> dict[str, Any]:
    from nagkit.data.dataset import load_dataset, make_header
    from nagkit.data.journal import JournaledSource, QueryJournal, table_tag
    from nagkit.io import sha256_file
    from nagkit.nag.config import config_to_dict
    from nagkit.nag.train import check_query_budget, save_trained, train_models

    ds = load_dataset(path, space=ws.space)
    fc = ws.frontier_config
    check_query_budget(fc, f"workspace {ws.name!r}: [frontier] total_queries")
    source = ws.open_accuracy_source()
    expensive = getattr(source, "expensive", False)
    if expensive and fc.queries != 0:
        raise BadInputError(
            f"workspace {ws.name!r}: its accuracy source ({source.name}) is expensive on this machine, and the "
            "frontier search would query it thousands of times",
            hint="set [frontier] queries = 0 in the workspace (train on the dataset alone), or collect "
                 "accuracies on a GPU first")
    table_prov = ws.latency_table_provenance()
    tag = table_tag(table_prov)
    journal = QueryJournal(ws.artifact_path("queries"), ws.space, source.provenance())
    paid = journal.read()
    plan = query_plan(fc, ds, paid, tag)
    archs = list(ds.archs) + list(paid.archs)
    acc = list(ds.accuracy) + list(paid.accuracy)
    if log:
        log(f"training on {len(ds)} archs of {path}" + (f" and {len(paid)} journaled queries of {journal.path}"
                                                          if len(paid) else "")
            + (f" ({plan['carried']} accuracies carried over from another latency table)" if plan["carried"] else "")
            + f"; up to {plan['cap']} new accuracy queries")
    queried = JournaledSource(source, journal, tag)
    search_fc = fc
    if plan["carried"] and fc.method == "surrogate":  # re-targeted: the search for carried archives (decisions 41)
        search_fc = dataclasses.replace(fc, active=fc.retarget)
    trained = train_models(ws.space, ws.latency_table, archs, acc, budgets=ws.budgets,
                           evaluator_cfg=ws.evaluator_config, generator_cfg=ws.generator_config,
                           frontier_cfg=search_fc, surrogate_cfg=ws.surrogate_config,
                           source=None if plan["cap"] == 0 else queried, progress=progress, query_cap=plan["cap"])
    rep = trained.report
    new = rep["frontier"]["queries"] + rep["refinement"]["queries"]
    queries = {"dataset": len(ds), "journaled_before": len(paid), "carried": plan["carried"],
               "frontier_search": rep["frontier"]["queries"], "refinement": rep["refinement"]["queries"],
               "new": new, "for_this_table": plan["paid_for_table"] + new,
               "total": len(ds) + len(paid) + new, "cap": plan["cap"], "budget": plan["budget"]}
    prov = {"workspace": ws.name, "dataset": str(path), "dataset_sha256": sha256_file(path), "dataset_rows": len(ds),
            "dataset_header": {k: ds.header.get(k) for k in ("space", "seed", "accuracy_source")},
            "latency_table": table_prov, "seed": ws.seed, "budgets": config_to_dict(ws.budgets),
            "frontier": config_to_dict(fc), "frontier_search": "retarget" if search_fc is not fc else "active",
            "surrogate": config_to_dict(ws.surrogate_config),
            "accuracy_queries": queries}
    header = make_header(ws.space, table_prov, source.provenance(), ws.seed)
    header["sampling"] = ("frontier archive: the archs among the generator's imitation_top most accurate of the "
                          "training data within their own latency (nagkit train)")
    header["archive"] = {"k": ws.generator_config.imitation_top, "rows": len(trained.archive),
                         "dataset_sha256": prov["dataset_sha256"], "accuracy_queries": queries}
    paths = {k: ws.artifact_path(k) for k in ("evaluator", "generator", "archive")}
    save_trained(trained, paths, prov, header)
    ev = rep["evaluator"]
    return {"evaluator": str(paths["evaluator"]), "generator": str(paths["generator"]),
            "archive": str(paths["archive"]), "queries_journal": str(journal.path), "range_ms": rep["range_ms"],
            "grid_ms": rep["grid_ms"], "seconds": rep["seconds"], "accuracy_queries": queries,
            "frontier_search": {"kind": prov["frontier_search"], "rounds": rep["frontier"]["rounds"],
                                "explore_queries": rep["frontier"].get("explore_queries", 0)},
            "evaluator_kind": ev.get("kind", "learned"), "holdout": ev.get("holdout", {}),
            "frontier_fit": ev.get("frontier_fit", {}),
            "archive_rows": rep["archive_rows"], "training_rows": rep["training_rows"]}


def query_plan(fc, ds, paid, tag: str) -> dict[str, int]:
    """How many new accuracy queries a training for the table tagged ``tag`` may make.

    Accuracies paid for another table, or a dataset carried over from one, are *carried*: free.
    A training from scratch may spend ``total_queries`` in all, its dataset included; one that
    starts from carried accuracies ``retarget_queries`` new ones. Queries a previous run already
    journaled for this table count as spent (a rerun after a failure spends only the rest)."""
    ds_tag = ((ds.header.get("latency_table") or {}).get("sha256") or "")[:16]
    ds_carried = bool(ds.header.get("carried_from")) or (bool(ds_tag) and ds_tag != tag)
    carried = (len(ds) if ds_carried else 0) + (len(paid) - paid.paid_for(tag))
    for_table = paid.paid_for(tag)
    if fc.queries == 0:
        budget = 0
    elif fc.queries > 0:
        budget = fc.queries
    elif carried:
        budget = fc.retarget_queries
    else:
        budget = fc.total_queries - len(ds)
    return {"cap": max(0, budget - for_table), "budget": budget, "carried": carried, "paid_for_table": for_table}


def generate(workspace, budgets: Sequence[float], *, samples: int | None = None, seed: int = 0, top: int = 10,
             search_queries: int | None = None, display: bool = True, model=None, limits=None) -> list:
    """Ranked candidates for each budget (:class:`nagkit.nag.infer.BudgetResult`, best first).
    Zero accuracy-source queries choose them unless ``search_queries`` > 0. ``limits``
    (:class:`nagkit.nag.constraints.Limits`): met by every sample; the file size and activation
    bytes are those of a TFLite export at the precision of the workspace's latency table."""
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    model = model or ws.nag_model(with_source=display or bool(search_queries))
    return model.generate(budgets, samples=samples, seed=seed, top=top, search_queries=search_queries,
                          display=display, limits=limits, formats=("tflite",),
                          precision=ws.latency_table.precision)
