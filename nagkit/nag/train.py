"""`nagkit train`: frontier search, evaluator, generator; artifacts saved atomically.

The pipeline (docs/decisions.md 17), all of it counted against the accuracy source:

1. **Frontier search** (:mod:`nagkit.nag.guided`, ``[frontier]``): from the uniform dataset and
   the space's fastest and slowest arch, an accuracy-guided local search at budgets drawn across
   the whole latency range of the table, until the training's query budget
   (``total_queries``, dataset included) is spent.
2. **Evaluator** R(alpha|B) on everything queried (:mod:`nagkit.nag.evaluator`).
3. **Frontier archive**: the archs among the ``imitation_top`` most accurate within their own
   latency (:mod:`nagkit.nag.archive`).
4. **Generator**: imitation of the archive (teacher forcing on (B, top archs within B)), then
   REINFORCE on the evaluator's reward (:mod:`nagkit.nag.generator`), constrained decoding
   throughout.

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
from nagkit.nag.config import (BudgetConfig, EvaluatorConfig, FrontierConfig, GeneratorConfig, config_from_dict,
                               torch_threads)
from nagkit.nag.evaluator import Evaluator, train_evaluator
from nagkit.nag.generator import Generator, imitate, reinforce
from nagkit.nag.guided import GuidedSearch, run_guided, stratified
from nagkit.space.decisions import Decisions, Pool, concat, dedupe, from_archs
from nagkit.space.space import SearchSpace

ARTIFACT_SCHEMA = 2

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class Trained:
    evaluator: Evaluator
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


def frontier_search(space: SearchSpace, latency: SlotLatency, known: Pool, cfg: FrontierConfig, source,
                    seed: int, progress: Progress | None = None) -> tuple[Pool, dict[str, Any]]:
    """Step 1: the extremes of the space, then the guided search; returns everything known."""
    t0, q0 = time.perf_counter(), source.queries
    ext = concat(latency.extreme(False), latency.extreme(True))
    ext = Pool(ext, np.zeros(2), latency(ext))
    ext.accuracy = np.asarray(source.evaluate_decisions(ext.dec), dtype=np.float64)
    known = known + ext
    cap = cfg.queries if cfg.queries >= 0 else max(0, cfg.total_queries - len(known) - refine_reserve(cfg))
    rounds = 0
    if cap > 0:
        search = GuidedSearch(space, latency, cfg, known, stratified(latency.fastest_ms, latency.slowest_ms,
                                                                     cfg.budgets), cap=cap, shared=True, seed=seed)
        known = run_guided(search, source.evaluate_decisions,
                           progress=(lambda d, t: progress("frontier search", d, t)) if progress else None)
        rounds = search.rounds
    return known, {"queries": source.queries - q0, "cap": cap, "rounds": rounds,
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


def train_models(space: SearchSpace, table, archs, acc: np.ndarray, *, budgets: BudgetConfig,
                 evaluator_cfg: EvaluatorConfig, generator_cfg: GeneratorConfig, frontier_cfg: FrontierConfig,
                 source=None, progress: Progress | None = None) -> Trained:
    """The whole training (see the module doc). ``archs``/``acc``: the uniform dataset."""
    with torch_threads():
        t0 = time.perf_counter()
        latency = SlotLatency(table, space)
        grid = make_grid(budgets, latency)
        dec = from_archs(space, list(archs))
        known = Pool(dec, np.zeros(len(dec)), latency(dec), np.asarray(acc, dtype=np.float64))
        front = {"queries": 0, "cap": 0, "rounds": 0, "seconds": 0.0}
        if source is not None:
            known, front = frontier_search(space, latency, known, frontier_cfg, source, generator_cfg.seed, progress)
        elif frontier_cfg.queries > 0:
            raise BadInputError("the frontier search ([frontier] queries > 0) needs the workspace's accuracy source")
        keep = dedupe(space, known.dec)
        known = known.select(keep)
        ev, ev_report = train_evaluator(space, known.dec, known.latency, known.accuracy, grid, evaluator_cfg,
                                        embed_dim=budgets.embed_dim,
                                        progress=(lambda d, t, _l: progress("evaluator", d, t)) if progress else None)
        archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, generator_cfg.imitation_top)
        gen = train_generator(space, grid, generator_cfg, ev, latency, archive, budgets.embed_dim, progress)
        ref = {"queries": 0, "rounds": [], "seconds": 0.0}
        if source is not None and frontier_cfg.refine_rounds > 0:
            left = None
            if frontier_cfg.queries < 0:  # the training's total: dataset + search + refinement
                left = frontier_cfg.total_queries - len(dec) - front["queries"]
            known, ev, archive, ref = refine(space, latency, known, ev, gen, frontier_cfg, evaluator_cfg, source,
                                             generator_cfg.seed, progress, max_queries=left)
        report = {"grid_ms": list(grid.values), "range_ms": [latency.fastest_ms, latency.slowest_ms],
                  "evaluator": ev_report, "generator": gen.report, "frontier": front, "refinement": ref,
                  "training_rows": len(known), "archive_rows": len(archive),
                  "seconds": time.perf_counter() - t0, "torch_threads": torch.get_num_threads()}
        return Trained(ev, gen, archive, report)


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
    if not isinstance(meta, dict) or meta.get("schema") != ARTIFACT_SCHEMA or meta.get("kind") != kind:
        got = (meta.get("kind"), meta.get("schema")) if isinstance(meta, dict) else (None, None)
        raise ArtifactError(f"{str(jp)!r} is not a nagkit {kind} of schema {ARTIFACT_SCHEMA} "
                            f"(found kind {got[0]!r}, schema {got[1]!r})",
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
        raise CheckpointError(f"cannot load {kind} weights {str(path)!r}: {str(e).splitlines()[0][:120]}",
                              hint="retrain with `nagkit train --workspace W`") from None
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, meta
