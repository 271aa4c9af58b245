"""`nagkit train`: evaluator then generator for a workspace; artifacts are saved atomically.

Each model is a torch ``state_dict`` (``evaluator.pt``, ``generator.pt``) plus a JSON config
beside it (``evaluator.json``, ``generator.json``) with the budget grid, hyper-parameters,
space, provenance (dataset sha256, seed, versions) and training report. Loading rebuilds the
module from the JSON and reads the weights with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nagkit.errors import ArtifactError, CheckpointError
from nagkit.io import atomic_torch_save, atomic_write_json
from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import BudgetConfig, EvaluatorConfig, GeneratorConfig, config_from_dict, torch_threads
from nagkit.nag.decisions import Decisions, from_archs
from nagkit.nag.evaluator import Evaluator, train_evaluator
from nagkit.nag.generator import Generator, train_generator
from nagkit.space.space import SearchSpace

ARTIFACT_SCHEMA = 1




def make_grid(cfg: BudgetConfig, dataset_range: tuple[float, float]) -> BudgetGrid:
    lo = cfg.min_ms if cfg.min_ms is not None else dataset_range[0]
    hi = cfg.max_ms if cfg.max_ms is not None else dataset_range[1]
    return BudgetGrid.evenly(float(lo), float(hi), cfg.k)


def evaluator_reward(evaluator: Evaluator, table, space: SearchSpace,
                     infeasible_penalty: float = 0.0) -> Callable[[Decisions, np.ndarray], torch.Tensor]:
    """R(alpha|B; w) of sampled decisions (latency from the table when the evaluator uses it),
    minus ``infeasible_penalty * (1 + 10 * (c/B - 1))`` for archs over budget."""

    def reward(dec: Decisions, budgets: np.ndarray) -> torch.Tensor:
        need_lat = evaluator.cfg.latency_feature or infeasible_penalty > 0
        lat = table.predict_many(space, dec.to_archs(space)) if need_lat else np.zeros(len(dec))
        with torch.no_grad():
            r = evaluator.score(evaluator.features(dec, lat), torch.from_numpy(budgets).float())
        if infeasible_penalty > 0:
            over = np.maximum(lat / budgets - 1.0, 0.0)
            pen = np.where(over > 0, infeasible_penalty * (1.0 + 10.0 * over), 0.0)
            r = r - torch.from_numpy(pen).float()
        return r

    return reward


def train_models(space: SearchSpace, table, archs, lat: np.ndarray, acc: np.ndarray, *,
                 budgets: BudgetConfig, evaluator_cfg: EvaluatorConfig, generator_cfg: GeneratorConfig,
                 source=None, progress_eval=None, progress_gen=None,
                 log: Callable[[str], None] | None = None) -> tuple[Evaluator, Generator, dict[str, Any]]:
    """Evaluator, then generator; then ``refine_rounds`` rounds of frontier refinement, which
    need the accuracy source (its queries are counted in the report)."""
    with torch_threads():
        return _train_models(space, table, archs, lat, acc, budgets=budgets, evaluator_cfg=evaluator_cfg,
                             generator_cfg=generator_cfg, source=source, progress_eval=progress_eval,
                             progress_gen=progress_gen, log=log)


def _train_models(space, table, archs, lat, acc, *, budgets, evaluator_cfg, generator_cfg, source,
                  progress_eval, progress_gen, log):
    grid = make_grid(budgets, (float(np.min(lat)), float(np.max(lat))))
    archs, lat, acc = list(archs), np.asarray(lat, float), np.asarray(acc, float)
    dec = from_archs(space, archs)
    t0 = time.perf_counter()
    ev, ev_report = train_evaluator(space, dec, lat, acc, grid, evaluator_cfg,
                                    embed_dim=budgets.embed_dim, progress=progress_eval)
    _freeze(ev)
    reward = evaluator_reward(ev, table, space, generator_cfg.infeasible_penalty)
    gen, gen_report = train_generator(space, grid, generator_cfg, reward, embed_dim=budgets.embed_dim,
                                      progress=progress_gen)
    gc = generator_cfg
    rounds: list[dict[str, Any]] = []
    q0 = source.queries if source is not None else 0
    if gc.refine_rounds > 0 and source is None:
        from nagkit.errors import BadInputError

        raise BadInputError("generator.refine_rounds > 0 needs the workspace's accuracy source")
    n_uniform = len(archs)
    lineage = np.ones(len(archs), dtype=bool)  # uniform data and search finds: the archive's own line
    for rnd in range(gc.refine_rounds):
        seen = {str(a) for a in archs}
        new_archs = _refine_proposals(space, table, ev, gen, grid, gc, rnd, seen)
        if new_archs:
            archs += new_archs
            lat = np.concatenate([lat, table.predict_many(space, new_archs)])
            acc = np.concatenate([acc, source.evaluate(new_archs)])
            lineage = np.r_[lineage, np.zeros(len(new_archs), dtype=bool)]
        if gc.refine_search_queries > 0:
            # seeded from the uniform data and earlier finds only: the generator's refinement archs
            # would pull every search into the generator's own basin (docs/decisions.md 15)
            idx = np.flatnonzero(lineage)
            s_archs, s_lat, s_acc = _search_proposals(space, table, source, [archs[j] for j in idx], lat[idx],
                                                      acc[idx], grid, gc, rnd, seen)
            new_archs = new_archs + s_archs
            archs += s_archs
            lat = np.concatenate([lat, s_lat])
            acc = np.concatenate([acc, s_acc])
            lineage = np.r_[lineage, np.ones(len(s_archs), dtype=bool)]
        dec = from_archs(space, archs)
        ev, ev_r = train_evaluator(space, dec, lat, acc, grid, evaluator_cfg, embed_dim=budgets.embed_dim,
                                   model=ev, epochs=gc.refine_epochs, seed_offset=1 + rnd,
                                   repeat=np.where(np.arange(len(archs)) < n_uniform, 1, gc.refine_oversample))
        _freeze(ev)
        gen, gen_r = train_generator(space, grid, gc, evaluator_reward(ev, table, space, gc.infeasible_penalty),
                                     embed_dim=budgets.embed_dim, gen=gen, steps=gc.refine_steps,
                                     seed_offset=1 + rnd)
        rounds.append({"round": rnd + 1, "new_archs": len(new_archs), "dataset_size": len(archs),
                       "holdout": ev_r.get("holdout", {}).get("mean_kendall_tau"),
                       "final_reward": gen_r["history"][-1]["reward"] if gen_r["history"] else None})
        if log:
            log(f"refinement round {rnd + 1}/{gc.refine_rounds}: +{len(new_archs)} archs")
    archive = None
    if gc.refine_search_queries > 0:  # the frontier archive (docs/decisions.md 15)
        from nagkit.nag.archive import Archive

        idx = np.flatnonzero(lineage)
        archive = Archive.from_arrays(space, [archs[j] for j in idx], lat[idx], acc[idx], gc.refine_search_seeds)
    report = {"grid_ms": list(grid.values), "evaluator": ev_report, "generator": gen_report,
              "refinement": rounds, "archive": archive,
              "refinement_queries": (source.queries - q0) if source is not None else 0,
              "seconds": time.perf_counter() - t0, "torch_threads": torch.get_num_threads()}
    return ev, gen, report


def _search_proposals(space, table, source, archs, lat, acc, grid, gc, rnd: int, seen: set[str]):
    """Archs found by the accuracy-source-guided local search at ``refine_budgets`` budgets of
    the grid, started from the data's ``refine_search_seeds`` most accurate archs within each
    (their accuracies are known: no query), with their table latency and (queried, counted)
    accuracy; archs already in the data are left out."""
    from nagkit.nag.archive import Archive
    from nagkit.nag.local import DecisionAccuracy, DecisionLatency, source_search

    budgets = grid.stratified(gc.refine_budgets, np.random.default_rng(gc.seed + 2000 + rnd), gc.refine_search_from)
    k = gc.refine_search_seeds
    seed_dec, grp, seed_acc = Archive.from_arrays(space, archs, lat, acc, k).seeds(budgets, k)
    if not len(grp):
        return [], np.zeros(0), np.zeros(0)
    d, g, a, lt, _ = source_search(space, seed_dec, grp, seed_acc, budgets, DecisionLatency(table, space),
                                   DecisionAccuracy(source, space), rounds=gc.refine_search_rounds,
                                   queries=gc.refine_search_queries, parents=8, children=100, seed=gc.seed + 2000 + rnd,
                                   max_changes=3, repair=4, screen=10)
    n0 = len(grp)
    out, out_lat, out_acc = [], [], []
    for arch, la, ac in zip(d.select(np.arange(n0, len(g))).to_archs(space), lt[n0:], a[n0:]):
        key = str(arch)
        if key not in seen:
            seen.add(key)
            out.append(arch)
            out_lat.append(la)
            out_acc.append(ac)
    return out, np.asarray(out_lat, dtype=np.float64), np.asarray(out_acc, dtype=np.float64)


def _refine_proposals(space, table, ev, gen, grid, gc, rnd: int, seen: set[str]) -> list:
    """Archs to query in a refinement round: for ``refine_budgets`` budgets, the evaluator's top
    unique feasible archs among ``refine_pool`` generator samples (at ``refine_temperature``),
    refined by ``refine_local_rounds`` rounds of evaluator-guided local search when > 0, that
    are not in the data yet; ``refine_samples`` in all."""
    from nagkit.nag.generator import sample_archs

    rng = np.random.default_rng(gc.seed + 1000 + rnd)
    budgets = grid.stratified(gc.refine_budgets, rng)
    dec, bud = sample_archs(gen, budgets, gc.refine_pool, seed=gc.seed + 1000 + rnd, temperature=gc.refine_temperature)
    per = max(1, gc.refine_samples // gc.refine_budgets)
    if gc.refine_local_rounds > 0:
        from nagkit.nag.local import DecisionLatency, _rank_in_groups, fitness_of, local_search, seed_niches

        def score_fn(d, lat, b):
            with torch.no_grad():
                return ev.score(ev.features(d, lat), torch.from_numpy(np.asarray(b)).float()).numpy()

        grp = np.repeat(np.arange(len(budgets)), gc.refine_pool)
        dec, sub, nn = seed_niches(space, dec, grp, gc.refine_niches)
        dec, sub, lat, sc = local_search(space, dec, sub, np.repeat(budgets, nn), score_fn,
                                         DecisionLatency(table, space), rounds=gc.refine_local_rounds,
                                         children=max(1, gc.refine_pool // nn), parents=max(2, 20 // nn),
                                         prob=0.1, keep=max(2, 4 * per // nn), seed=gc.seed + 1000 + rnd)
        grp = sub // nn
        fit = fitness_of(sc, lat, budgets[grp])
        rank = _rank_in_groups(sub, fit) * nn + sub % nn  # the niches' best in turn
        out = []
        for i in range(len(budgets)):
            sel = np.flatnonzero((grp == i) & (lat <= budgets[i]))
            sel = sel[np.argsort(rank[sel], kind="stable")]
            took = 0
            for j, a in zip(sel, dec.select(sel).to_archs(space)):
                if took >= per:
                    break
                key = str(a)
                if key not in seen:
                    seen.add(key)
                    out.append(a)
                    took += 1
        return out
    archs = dec.to_archs(space)
    lat = table.predict_many(space, archs)
    with torch.no_grad():
        sc = ev.score(ev.features(dec, lat), torch.from_numpy(bud).float()).numpy()
    out = []
    for i in range(len(budgets)):
        sl = np.arange(i * gc.refine_pool, (i + 1) * gc.refine_pool)
        order = sl[np.argsort(-np.where(lat[sl] <= bud[sl], sc[sl], -np.inf), kind="stable")]
        took = 0
        for j in order:
            if took >= per or lat[j] > bud[j]:
                break
            key = str(archs[j])
            if key not in seen:
                seen.add(key)
                out.append(archs[j])
                took += 1
    return out


def _freeze(model: torch.nn.Module) -> None:
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)


# -- artifacts ---------------------------------------------------------------------------
def _json_path(pt: Path) -> Path:
    return pt.with_suffix(".json")


def save_model(path: str | Path, model: torch.nn.Module, provenance: dict[str, Any], report: dict[str, Any]) -> None:
    from nagkit import __version__

    path = Path(path)
    meta = {"schema": ARTIFACT_SCHEMA, "kind": type(model).__name__.lower(), **model.config_dict(),
            "provenance": {**provenance, "nagkit_version": __version__, "torch_version": torch.__version__},
            "report": report}
    atomic_torch_save(path, {k: v.detach().clone() for k, v in model.state_dict().items()})
    atomic_write_json(_json_path(path), meta)


def save_archive(ws, archive, source, provenance: dict[str, Any]) -> Path:
    """Write the frontier archive artifact of ``ws`` (dataset format; docs/decisions.md 15)."""
    from nagkit.data.dataset import make_header

    header = make_header(ws.space, ws.latency_table_provenance(), source.provenance(), ws.seed)
    header["sampling"] = ("frontier archive: the archs among the refine_search_seeds most accurate of the "
                          "training data within their own latency (nagkit train)")
    header["archive"] = {"k": ws.generator_config.refine_search_seeds, "rows": len(archive),
                         "dataset_sha256": provenance.get("dataset_sha256"),
                         "accuracy_queries": provenance.get("accuracy_queries")}
    return archive.save(ws.artifact_path("archive"), ws.space, header)


def load_model(path: str | Path, kind: str, space: SearchSpace | None = None):
    """Rebuild an ``evaluator`` or ``generator`` from ``X.pt`` + ``X.json``."""
    path = Path(path)
    jp = _json_path(path)
    if not path.is_file() or not jp.is_file():
        missing = path if not path.is_file() else jp
        raise ArtifactError(f"{kind} artifact {str(missing)!r} is missing",
                            hint="train it with `nagkit train --workspace W`")
    try:
        meta = json.loads(jp.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{str(jp)!r} is corrupt ({e.msg}); retrain with `nagkit train`") from None
    if meta.get("schema") != ARTIFACT_SCHEMA or meta.get("kind") != kind:
        raise ArtifactError(f"{str(jp)!r} is not a nagkit {kind} (schema {ARTIFACT_SCHEMA}); "
                            f"found kind {meta.get('kind')!r} schema {meta.get('schema')!r}",
                            hint="retrain with `nagkit train --workspace W`")
    sp = SearchSpace.from_dict(meta["space"])
    if space is not None and sp != space:
        raise ArtifactError(f"{kind} {str(path)!r} was trained for space {sp.name!r}, not {space.name!r}",
                            hint="retrain with `nagkit train --workspace W`")
    grid = BudgetGrid(tuple(meta["grid"]["values"]))
    if kind == "evaluator":
        model = Evaluator(sp, grid, config_from_dict(EvaluatorConfig, meta["evaluator"], str(jp)), meta["embed_dim"])
    else:
        model = Generator(sp, grid, config_from_dict(GeneratorConfig, meta["generator"], str(jp)), meta["embed_dim"])
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(sd, strict=True)
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file
        raise CheckpointError(f"cannot load {kind} weights {str(path)!r}: {str(e).splitlines()[0]}",
                              hint="retrain with `nagkit train --workspace W`") from None
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, meta
