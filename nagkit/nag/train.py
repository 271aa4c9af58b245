"""`nagkit train`: frontier search, evaluator, generator; artifacts saved atomically.

The pipeline (NAG v3, docs/decisions.md 37), every accuracy query counted:

1. **Frontier search** (``[frontier]``): from the dataset (and any accuracies carried over) and
   the space's fastest and slowest arch, the surrogate-assisted search of
   :mod:`nagkit.nag.frontier` at budgets drawn across the table's whole latency range, until the
   training's query budget is spent (``total_queries``, the dataset included;
   ``retarget_queries`` new ones when accuracies were carried over from another table).
   ``method = "guided"`` is v2's search (:mod:`nagkit.nag.guided`, decisions 17).
2. **Evaluator** R(alpha|B): the accuracy surrogate, fitted on everything queried, with the
   dominance order computed from the table (:mod:`nagkit.nag.surrogate`); ``kind = "learned"``
   trains v2's network (:mod:`nagkit.nag.evaluator`).
3. **Frontier archive**: the archs among the ``imitation_top`` most accurate within their own
   latency (:mod:`nagkit.nag.archive`).
4. **Generator**: imitation of the archive (teacher forcing on (B, top archs within B)), then
   REINFORCE on the evaluator's reward (0 steps by default), constrained decoding throughout
   (:mod:`nagkit.nag.generator`).

Each model is a torch ``state_dict`` (``evaluator.pt``, ``generator.pt``) plus a JSON config
beside it with the budget grid, hyper-parameters, space, provenance (dataset sha256, seed,
query counts, versions) and training report. The generator and the archive record the sha256
of the ``evaluator.pt`` they were trained with, and loading refuses a mismatched set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nagkit.errors import ArtifactError, BadInputError, CheckpointError
from nagkit.io import atomic_torch_save, atomic_write_json, sha256_file
from nagkit.latency.slots import SlotLatency
from nagkit.nag.archive import Archive
from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import (MIN_QUERIES, BudgetConfig, EvaluatorConfig, FrontierConfig, GeneratorConfig,
                               SurrogateConfig, config_from_dict, torch_threads)
from nagkit.nag.evaluator import Evaluator, train_evaluator
from nagkit.nag.frontier import ActiveSearch, run_active
from nagkit.nag.generator import Generator, imitate, reinforce
from nagkit.nag.guided import GuidedSearch, run_guided, stratified
from nagkit.nag.surrogate import Surrogate, holdout_error, make_surrogate
from nagkit.space.decisions import Decisions, Pool, concat, dedupe, from_archs, key_bytes
from nagkit.space.resources import SlotResources
from nagkit.space.space import SearchSpace

ARTIFACT_SCHEMA = 2

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class Trained:
    evaluator: Evaluator | Surrogate
    generator: Generator
    archive: Archive
    report: dict[str, Any] = field(default_factory=dict)


def make_grid(cfg: BudgetConfig, latency: SlotLatency) -> BudgetGrid:
    """K budgets over [min_ms, max_ms], by default the table's whole range for the space."""
    lo = cfg.min_ms if cfg.min_ms is not None else latency.fastest_ms
    hi = cfg.max_ms if cfg.max_ms is not None else latency.slowest_ms
    return BudgetGrid.evenly(float(lo), float(hi), cfg.k)


def evaluator_reward(evaluator: Evaluator, latency: SlotLatency, kind: str = "dominance", coef: float = -0.07):
    """The REINFORCE reward of sampled decisions: R(alpha|B) (``dominance``), or MnasNet's
    ``A * (c/B)^w`` / TuNAS's ``A + beta |c/B - 1|`` with A the evaluator's accuracy estimate
    (R at the top budget, where every arch fits)."""
    top = evaluator.grid.hi

    def reward(dec: Decisions, budgets: np.ndarray) -> torch.Tensor:
        lat = latency(dec)
        with torch.no_grad():
            x = evaluator.features(dec, lat)
            if kind == "dominance":
                return evaluator.score(x, torch.from_numpy(budgets).float())
            acc = evaluator.score(x, torch.full((len(dec),), top)).double()
        ratio = torch.from_numpy(lat / budgets)
        out = acc * ratio.pow(coef) if kind == "mnasnet" else acc + coef * 100.0 * (ratio - 1.0).abs()
        return out.float()

    return reward


def query_extremes(latency: SlotLatency, known: Pool, source) -> Pool:
    """``known`` plus the fastest and the slowest arch of the space on the table, queried."""
    ext = concat(latency.extreme(False), latency.extreme(True))
    ext = Pool(ext, np.zeros(2), latency(ext))
    ext.accuracy = np.asarray(source.evaluate_decisions(ext.dec), dtype=np.float64)
    return known + ext


def frontier_search(space: SearchSpace, latency: SlotLatency, known: Pool, cfg: FrontierConfig, source,
                    seed: int, progress: Progress | None = None, cap: int | None = None) -> tuple[Pool, dict[str, Any]]:
    """v2's step 1 (``method = "guided"``): the extremes of the space, then the guided search;
    returns everything known. ``cap``: the queries it may make (default: what ``total_queries``
    leaves after ``known`` and the refinement)."""
    t0, q0 = time.perf_counter(), source.queries
    known = query_extremes(latency, known, source)
    if cap is None:
        cap = cfg.queries if cfg.queries >= 0 else max(0, cfg.total_queries - len(known) - refine_reserve(cfg))
    else:
        cap = max(0, cap - 2 - refine_reserve(cfg))
    rounds = 0
    if cap > 0:
        search = GuidedSearch(space, latency, cfg, known, stratified(latency.fastest_ms, latency.slowest_ms,
                                                                     cfg.budgets), cap=cap, shared=True, seed=seed)
        known = run_guided(search, source.evaluate_decisions,
                           progress=(lambda d, t: progress("frontier search", d, t)) if progress else None)
        rounds = search.rounds
    return known, {"method": "guided", "queries": source.queries - q0, "cap": cap, "rounds": rounds,
                   "seconds": time.perf_counter() - t0}


def active_frontier(space: SearchSpace, latency: SlotLatency, known: Pool, cfg: FrontierConfig,
                    sur_cfg: SurrogateConfig, surrogate: Surrogate, source, cap: int, seed: int,
                    progress: Progress | None = None) -> tuple[Pool, dict[str, Any]]:
    """v3's step 1: the extremes (when not known yet), the surrogate's first fit, then the
    surrogate-assisted search until ``cap`` new queries are spent; returns everything known."""
    t0, q0 = time.perf_counter(), source.queries
    keys = set(key_bytes(space, known.dec))
    ext = concat(latency.extreme(False), latency.extreme(True))
    new = [i for i, k in enumerate(key_bytes(space, ext)) if k not in keys][:cap]
    if new:  # the fastest and the slowest network anchor the range
        ext = Pool(ext.select(new), np.zeros(len(new)), latency(ext.select(new)))
        ext.accuracy = np.asarray(source.evaluate_decisions(ext.dec), dtype=np.float64)
        known = known + ext
    search = ActiveSearch(space, latency, cfg.active, sur_cfg, surrogate, known, cap=cap - (source.queries - q0),
                          seed=seed)
    search.fit(sur_cfg.first_steps)
    known = run_active(search, source.evaluate_decisions,
                       progress=(lambda d, t: progress("frontier search", d, t)) if progress else None)
    fit_s = sum(f["seconds"] for f in search.fits)
    return known, {"method": "surrogate", "queries": source.queries - q0, "cap": cap, "rounds": search.rounds,
                   "refilled_rounds": search.refilled, "explore_queries": search.explored,
                   "surrogate_fits": len(search.fits), "surrogate_fit_seconds": fit_s,
                   "seconds": time.perf_counter() - t0}


def refine_reserve(cfg: FrontierConfig) -> int:
    """Queries the refinement may make (kept out of the frontier search's share)."""
    return cfg.refine_rounds * cfg.refine_budgets * cfg.refine_top


def refine(space: SearchSpace, latency: SlotLatency, known: Pool, ev: Evaluator, gen: Generator, cfg: FrontierConfig,
           ev_cfg: EvaluatorConfig, source, seed: int, progress: Progress | None = None, max_queries: int | None = None):
    """Rounds of: the generator's samples at many budgets, ranked by the evaluator; its top picks
    that are new are queried (counted, at most ``max_queries`` in all) and join the data; the
    evaluator trains on, the generator imitates the updated archive. Returns (known, evaluator,
    archive, report)."""
    from dataclasses import replace

    from nagkit.nag.generator import sample_archs

    rng = np.random.default_rng(seed + 7)
    lo, hi = latency.fastest_ms, latency.slowest_ms
    q0, t0, rows = source.queries, time.perf_counter(), []
    draw = stratified(lo, hi, cfg.refine_budgets)
    for rnd in range(cfg.refine_rounds):
        budgets = draw(rng)
        dec, bud = sample_archs(gen, budgets, cfg.refine_samples, seed=seed + 100 + rnd)
        lat = latency(dec)
        with torch.no_grad():
            sc = ev.score(ev.features(dec, lat), torch.from_numpy(bud).float()).numpy()
        group = np.repeat(np.arange(len(budgets)), cfg.refine_samples)
        picks = _new_top_picks(space, known, dec, group, sc, cfg.refine_top)
        if max_queries is not None:
            picks = picks[: max(0, max_queries - (source.queries - q0))]
        if not len(picks):
            break
        new = Pool(dec.select(picks), np.zeros(len(picks)), lat[picks])
        new.accuracy = np.asarray(source.evaluate_decisions(new.dec), dtype=np.float64)
        known = known + new
        ev, _ = train_evaluator(space, known.dec, known.latency, known.accuracy, ev.grid,
                                replace(ev_cfg, epochs=cfg.refine_epochs), embed_dim=ev.embed_dim, init=ev)
        archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, gen.cfg.imitation_top)
        imitate(gen, archive.targets(ev.grid.lo, ev.grid.hi, gen.cfg.imitation_top),
                replace(gen.cfg, imitation_steps=cfg.refine_imitation), seed + 200 + rnd)
        rows.append({"round": rnd + 1, "queried": len(new)})
        if progress:
            progress("refinement", rnd + 1, cfg.refine_rounds)
    archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, gen.cfg.imitation_top)
    return known, ev, archive, {"queries": source.queries - q0, "rounds": rows, "seconds": time.perf_counter() - t0}


def _new_top_picks(space: SearchSpace, known: Pool, dec: Decisions, group: np.ndarray, score: np.ndarray,
                   top: int) -> np.ndarray:
    """Row indices of each group's ``top`` best-scored archs that are not known yet (unique)."""
    from nagkit.space.decisions import key_bytes, rank_in_groups

    seen = set(key_bytes(space, known.dec))
    keys = key_bytes(space, dec)
    order = np.lexsort((rank_in_groups(group, score), group))
    taken = np.zeros(int(group.max()) + 1 if len(group) else 0, dtype=np.int64)
    out = []
    for i in order:
        g = group[i]
        if taken[g] >= top or keys[i] in seen:
            continue
        seen.add(keys[i])
        taken[g] += 1
        out.append(i)
    return np.asarray(out, dtype=np.int64)


def training_cap(frontier_cfg: FrontierConfig, known_rows: int) -> int:
    """New queries a training from ``known_rows`` dataset rows may make, by ``[frontier]``:
    ``queries`` when >= 0, else what ``total_queries`` leaves."""
    if frontier_cfg.queries >= 0:
        return frontier_cfg.queries
    return max(0, frontier_cfg.total_queries - known_rows)


def check_query_budget(frontier_cfg: FrontierConfig, where: str = "[frontier] total_queries") -> None:
    """A training that queries its source needs at least :data:`MIN_QUERIES` in all."""
    if frontier_cfg.queries != 0 and frontier_cfg.total_queries < MIN_QUERIES:
        raise BadInputError(f"{where} = {frontier_cfg.total_queries} is below the {MIN_QUERIES} accuracy queries "
                            "NAG's training needs at least (the dataset included)",
                            hint=f"set it to {MIN_QUERIES} or more, or set [frontier] queries = 0 to train on the "
                                 "dataset alone")


def train_models(space: SearchSpace, table, archs, acc: np.ndarray, *, budgets: BudgetConfig,
                 evaluator_cfg: EvaluatorConfig, generator_cfg: GeneratorConfig, frontier_cfg: FrontierConfig,
                 surrogate_cfg: SurrogateConfig | None = None, source=None, progress: Progress | None = None,
                 query_cap: int | None = None) -> Trained:
    """The whole training (see the module doc). ``archs``/``acc``: every accuracy known before it
    (the dataset, and any carried over). ``query_cap``: the new queries it may make (default
    :func:`training_cap`)."""
    sur_cfg = surrogate_cfg or SurrogateConfig(seed=generator_cfg.seed)
    with torch_threads():
        t0 = time.perf_counter()
        latency = SlotLatency(table, space)
        grid = make_grid(budgets, latency)
        dec = from_archs(space, list(archs))
        known = Pool(dec, np.zeros(len(dec)), latency(dec), np.asarray(acc, dtype=np.float64))
        known = known.select(dedupe(space, known.dec))
        cap = training_cap(frontier_cfg, len(dec)) if query_cap is None else int(query_cap)
        if source is None and frontier_cfg.queries > 0:
            raise BadInputError("the frontier search ([frontier] queries > 0) needs the workspace's accuracy source")
        if source is not None:
            check_query_budget(frontier_cfg)
        front: dict[str, Any] = {"method": frontier_cfg.method, "queries": 0, "cap": 0, "rounds": 0, "seconds": 0.0}
        surrogate = None
        if frontier_cfg.method == "surrogate" or evaluator_cfg.kind == "surrogate":
            surrogate = make_surrogate(space, grid, sur_cfg)
        if source is not None and cap > 0:
            if frontier_cfg.method == "surrogate":
                known, front = active_frontier(space, latency, known, frontier_cfg, sur_cfg, surrogate, source, cap,
                                               generator_cfg.seed, progress)
            else:
                known, front = frontier_search(space, latency, known, frontier_cfg, source, generator_cfg.seed,
                                               progress, cap=cap)
        known = known.select(dedupe(space, known.dec))
        if evaluator_cfg.kind == "surrogate":
            ev, ev_report = _final_surrogate(surrogate, known, sur_cfg, progress)
        else:
            ev, ev_report = train_evaluator(space, known.dec, known.latency, known.accuracy, grid, evaluator_cfg,
                                            embed_dim=budgets.embed_dim,
                                            progress=(lambda d, t, _l: progress("evaluator", d, t)) if progress else None)
        archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, generator_cfg.imitation_top)
        gen = train_generator(space, grid, generator_cfg, ev, latency, archive, budgets.embed_dim, progress)
        if frontier_cfg.active.limited > 0 or frontier_cfg.retarget.limited > 0:  # searched under limits: keep their best
            params = SlotResources(space).per_row("params", known.dec)
            archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, generator_cfg.imitation_top,
                                             params=params)
        ref = {"queries": 0, "rounds": [], "seconds": 0.0}
        if source is not None and frontier_cfg.refine_rounds > 0 and evaluator_cfg.kind == "learned":
            left = max(0, cap - front["queries"])
            known, ev, archive, ref = refine(space, latency, known, ev, gen, frontier_cfg, evaluator_cfg, source,
                                             generator_cfg.seed, progress, max_queries=left)
        report = {"grid_ms": list(grid.values), "range_ms": [latency.fastest_ms, latency.slowest_ms],
                  "evaluator": ev_report, "generator": gen.report, "frontier": front, "refinement": ref,
                  "query_cap": cap, "known_before": len(dec),
                  "training_rows": len(known), "archive_rows": len(archive),
                  "seconds": time.perf_counter() - t0, "torch_threads": torch.get_num_threads()}
        return Trained(ev, gen, archive, report)


def _final_surrogate(surrogate: Surrogate, known: Pool, cfg: SurrogateConfig,
                     progress: Progress | None) -> tuple[Surrogate, dict[str, Any]]:
    """The evaluator of v3: the surrogate, fitted ``final_steps`` more on everything known (from
    scratch, ``first_steps`` more, when no search fitted it). The report gives the fit's loss and
    the estimate's error on the frontier archive (in sample: those archs were fitted on; the
    held-out figures are in benchmarks/nag)."""
    rng = np.random.default_rng(cfg.seed + 17)
    first = surrogate._opt is None
    steps = cfg.final_steps + (cfg.first_steps if first else 0)
    rep = surrogate.fit(known.dec, known.accuracy, steps, rng)
    surrogate.eval()
    for p in surrogate.parameters():
        p.requires_grad_(False)
    if progress:
        progress("evaluator", 1, 1)
    top = Archive.from_decisions(known.dec, known.latency, known.accuracy, 1)
    rep = {"kind": "surrogate", **rep, "frontier_fit": holdout_error(surrogate, top.dec, top.accuracy)}
    return surrogate, rep


def train_generator(space: SearchSpace, grid: BudgetGrid, cfg: GeneratorConfig, evaluator: Evaluator,
                    latency: SlotLatency, archive: Archive, embed_dim: int, progress: Progress | None = None):
    """Step 4: imitation of the archive, then REINFORCE on the evaluator's reward. The report
    is attached as ``generator.report``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        gen = Generator(space, grid, cfg, embed_dim).bind(latency)
    im = imitate(gen, archive.targets(grid.lo, grid.hi, cfg.imitation_top), cfg, cfg.seed,
                 progress=(lambda d, t, _l: progress("generator imitation", d, t)) if progress else None)
    rl = reinforce(gen, (grid.lo, grid.hi), cfg, evaluator_reward(evaluator, latency, cfg.reward, cfg.reward_coef),
                   cfg.seed + 1, progress=(lambda d, t, _r: progress("generator REINFORCE", d, t)) if progress else None)
    gen.report = {"imitation": im, "reinforce": rl}
    return gen


# -- artifacts ---------------------------------------------------------------------------
def _json_path(pt: Path) -> Path:
    return pt.with_suffix(".json")


def save_model(path: str | Path, model: torch.nn.Module, provenance: dict[str, Any], report: dict[str, Any]) -> str:
    """Write ``X.pt`` and ``X.json`` atomically; returns the sha256 of ``X.pt``."""
    from nagkit.version import __version__

    path = Path(path)
    meta = {"schema": ARTIFACT_SCHEMA, "kind": type(model).__name__.lower(), **model.config_dict(),
            "provenance": {**provenance, "nagkit_version": __version__, "torch_version": torch.__version__},
            "report": report}
    atomic_torch_save(path, {k: v.detach().clone() for k, v in model.state_dict().items()})
    atomic_write_json(_json_path(path), meta)
    return sha256_file(path)


def save_trained(trained: Trained, paths: dict[str, Path], provenance: dict[str, Any], archive_header: dict) -> None:
    """Evaluator first, then the archive and the generator, both recording the evaluator's
    sha256 (a crash in between leaves a set that loading refuses, never a silent mix)."""
    ev_sha = save_model(paths["evaluator"], trained.evaluator, provenance, trained.report["evaluator"])
    prov = {**provenance, "evaluator_sha256": ev_sha}
    header = {**archive_header, "archive": {**archive_header.get("archive", {}), "evaluator_sha256": ev_sha}}
    trained.archive.save(paths["archive"], trained.evaluator.space, header)
    rep = {k: v for k, v in trained.report.items() if k != "evaluator"}
    save_model(paths["generator"], trained.generator, prov, rep)


def check_pair(evaluator_path: Path, generator_meta: dict, archive_header: dict | None = None) -> None:
    """Refuse a generator (or archive) trained with another evaluator than ``evaluator_path``."""
    want = generator_meta.get("provenance", {}).get("evaluator_sha256")
    have = sha256_file(evaluator_path)
    arch_sha = (archive_header or {}).get("archive", {}).get("evaluator_sha256", want)
    if want != have or arch_sha != have:
        raise ArtifactError(f"the generator and evaluator in {str(Path(evaluator_path).parent)!r} come from "
                            "different training runs (an interrupted `nagkit train`?)",
                            hint="retrain with `nagkit train --workspace W`")


def load_model(path: str | Path, kind: str, space: SearchSpace | None = None):
    """Rebuild an ``evaluator`` or ``generator`` from ``X.pt`` + ``X.json``."""
    from nagkit.io import input_file, read_input_file

    path = Path(path)
    jp = _json_path(path)
    hint = "train it with `nagkit train --workspace W`"
    input_file(path, f"{kind} artifact", error=ArtifactError, hint=hint)
    raw = read_input_file(jp, f"{kind} artifact", max_bytes=64 << 20, error=ArtifactError, hint=hint)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{str(jp)!r} is corrupt ({str(e)[:80]})", hint="retrain with `nagkit train`") from None
    kinds = ("evaluator", "surrogate") if kind == "evaluator" else (kind,)  # v3's evaluator is the surrogate
    if not isinstance(meta, dict) or meta.get("schema") != ARTIFACT_SCHEMA or meta.get("kind") not in kinds:
        got = (meta.get("kind"), meta.get("schema")) if isinstance(meta, dict) else (None, None)
        raise ArtifactError(f"{str(jp)!r} is not a nagkit {kind} of schema {ARTIFACT_SCHEMA} "
                            f"(found kind {got[0]!r}, schema {got[1]!r})",
                            hint="retrain with `nagkit train --workspace W`")
    sp = SearchSpace.from_dict(meta["space"])
    if space is not None and sp != space:
        raise ArtifactError(f"{kind} {str(path)!r} was trained for space {sp.name!r}, not {space.name!r}",
                            hint="retrain with `nagkit train --workspace W`")
    grid = BudgetGrid(tuple(meta["grid"]["values"]))
    if meta["kind"] == "surrogate":
        model = Surrogate(sp, grid, config_from_dict(SurrogateConfig, meta["surrogate"], str(jp)))
        sd = _load_state(path, kind)
        for name in ("memory_keys", "memory_acc"):  # sized by the data: make room before loading
            if name in sd:
                setattr(model, name, torch.empty_like(sd[name]))
    elif kind == "evaluator":
        model = Evaluator(sp, grid, config_from_dict(EvaluatorConfig, meta["evaluator"], str(jp)), meta["embed_dim"])
    else:
        model = Generator(sp, grid, config_from_dict(GeneratorConfig, meta["generator"], str(jp)), meta["embed_dim"])
    try:
        model.load_state_dict(sd if meta["kind"] == "surrogate" else _load_state(path, kind), strict=True)
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file
        raise CheckpointError(f"cannot load {kind} weights {str(path)!r}: {str(e).splitlines()[0][:120]}",
                              hint="retrain with `nagkit train --workspace W`") from None
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, meta


def _load_state(path: Path, kind: str) -> dict[str, torch.Tensor]:
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file
        raise CheckpointError(f"cannot load {kind} weights {str(path)!r}: {str(e).splitlines()[0][:120]}",
                              hint="retrain with `nagkit train --workspace W`") from None
    if not isinstance(sd, dict):
        raise CheckpointError(f"{kind} weights {str(path)!r} are not a state dict", hint="retrain with `nagkit train`")
    return sd
