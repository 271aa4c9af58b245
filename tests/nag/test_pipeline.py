"""Training (frontier search, evaluator, archive, generator), artifacts, zero-query inference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from nagkit.data.accuracy import open_accuracy_source
from nagkit.errors import ArtifactError, BadInputError, exit_code_for
from nagkit.nag.budgets import BudgetBelowRangeError
from nagkit.nag.config import (ActiveConfig, BudgetConfig, EvaluatorConfig, FrontierConfig, GeneratorConfig,
                               InferenceConfig, SurrogateConfig)
from nagkit.nag.infer import NagModel
from nagkit.nag.train import save_trained, train_models
from tests.nag.helpers import LAT, SP, TABLE, synthetic_data

EV = EvaluatorConfig(epochs=6, hidden=32, batch_size=64)
GEN = GeneratorConfig(hidden=32, token_dim=8, imitation_steps=40, imitation_batch=64, steps=5, budgets_per_step=4,
                      samples_per_budget=8)
SUR = SurrogateConfig(hidden=32, first_steps=60, round_steps=10, final_steps=30)
FRONT = FrontierConfig(total_queries=700, active=ActiveConfig(budgets=10, picks=3, generations=2, children=16))
V2_EV = EvaluatorConfig(kind="learned", epochs=6, hidden=32, batch_size=64)
V2_FRONT = FrontierConfig(method="guided", queries=-1, total_queries=700, budgets=4, children=10, parents=4, screen=3,
                          refine_rounds=1, refine_budgets=5, refine_samples=10, refine_top=2, refine_epochs=2,
                          refine_imitation=5)


def _train(seed=0, front=FRONT, source=True, ev=EV):
    archs, _, acc = synthetic_data(400, seed=1)
    src = open_accuracy_source("synthetic:", SP) if source else None
    tr = train_models(SP, TABLE, archs, acc, budgets=BudgetConfig(k=4, embed_dim=8),
                      evaluator_cfg=ev, generator_cfg=GeneratorConfig(**{**GEN.__dict__, "seed": seed}),
                      frontier_cfg=front, surrogate_cfg=SUR, source=src)
    return tr, src


@pytest.fixture(scope="module")
def trained():
    return _train()


def test_training_spends_the_query_budget_and_covers_the_whole_range(trained):
    tr, src = trained
    rep = tr.report
    # v3: the dataset (400, not queried here) + the two extreme archs + the surrogate-assisted
    # search spend exactly total_queries = 700; no refinement
    assert rep["query_cap"] == 300 and rep["frontier"]["queries"] == 300 == src.queries
    assert rep["frontier"]["method"] == "surrogate" and rep["refinement"]["queries"] == 0
    assert rep["frontier"]["rounds"] >= 10 and rep["frontier"]["surrogate_fits"] == rep["frontier"]["rounds"] + 1
    assert rep["range_ms"] == pytest.approx([LAT.fastest_ms, LAT.slowest_ms])
    assert rep["grid_ms"][0] == pytest.approx(LAT.fastest_ms) and rep["grid_ms"][-1] == pytest.approx(LAT.slowest_ms)
    ar = tr.archive
    assert ar.latency_ms[0] == pytest.approx(LAT.fastest_ms)  # the fastest network was queried and kept
    assert rep["generator"]["imitation"]["steps"] == 40 and rep["generator"]["reinforce"]["steps"] == 5
    unique = len(set(map(str, synthetic_data(400, seed=1)[0])))
    assert rep["evaluator"]["kind"] == "surrogate" and rep["evaluator"]["rows"] == rep["training_rows"] == unique + 300


def test_the_search_finds_a_better_frontier_than_the_dataset(trained):
    """Every queried arch is in the archive's data, and the frontier it finds dominates the
    uniform dataset's at budgets across the range (synthetic accuracy: the truth is known)."""
    tr, _ = trained
    archs, lat, acc = synthetic_data(400, seed=1)
    budgets = np.linspace(LAT.fastest_ms * 1.3, LAT.slowest_ms * 0.8, 6)
    best_ds = [acc[lat <= b].max() for b in budgets]
    best_ar = [tr.archive.accuracy[tr.archive.latency_ms <= b].max() for b in budgets]
    assert all(a >= d for a, d in zip(best_ar, best_ds)) and sum(a > d for a, d in zip(best_ar, best_ds)) >= 4


def test_v2_pipeline_is_kept_for_the_ablations():
    """``method = "guided"`` and ``kind = "learned"``: v2's search, learned evaluator and refinement."""
    tr, src = _train(front=V2_FRONT, ev=V2_EV)
    rep = tr.report
    # dataset (400, not queried here) + the two extreme archs + the frontier search + the
    # refinement (at most 1 round x 5 budgets x 2 picks, kept out of the search's share) <= 700
    assert rep["frontier"]["cap"] == 700 - 400 - 2 - 10 and rep["frontier"]["queries"] == 2 + 288
    assert 0 < rep["refinement"]["queries"] <= 10
    assert src.queries == rep["frontier"]["queries"] + rep["refinement"]["queries"] <= 300
    assert type(tr.evaluator).__name__ == "Evaluator" and "holdout" in rep["evaluator"]


def test_training_without_a_source_uses_the_dataset_alone():
    tr, _ = _train(front=FrontierConfig(queries=0), source=False)
    assert tr.report["frontier"]["queries"] == 0 and tr.report["training_rows"] == len(set(map(str, synthetic_data(400, 1)[0])))
    with pytest.raises(BadInputError, match="accuracy source"):
        _train(front=FrontierConfig(queries=10), source=False)


def test_a_query_budget_below_the_minimum_is_refused_naming_it():
    with pytest.raises(BadInputError, match=r"total_queries = 499 is below the 500") as e:
        _train(front=FrontierConfig(total_queries=499))
    assert "500" in e.value.hint and exit_code_for(e.value) == 2


def test_zero_query_generation_fits_every_budget_and_queries_nothing(trained):
    tr, _ = trained
    src = open_accuracy_source("synthetic:", SP)
    m = NagModel(SP, TABLE, tr.evaluator, tr.generator, src, InferenceConfig(samples=30), tr.archive)
    budgets = list(np.linspace(LAT.fastest_ms, LAT.slowest_ms, 7))
    res = m.generate(budgets, display=False)
    assert src.queries == 0
    for b, r in zip(budgets, res):
        assert r.selection_queries == 0 and r.display_queries == 0 and r.note is None
        assert all(c.latency_ms <= b + 1e-9 for c in r.candidates)
        scores = [c.evaluator_score for c in r.candidates]
        assert scores == sorted(scores, reverse=True)
        assert len({str(c.arch) for c in r.candidates}) == len(r.candidates)
    shown = m.generate(budgets[3:4])[0]  # displaying the chosen arch's accuracy costs one query, counted apart
    assert shown.selection_queries == 0 and shown.display_queries == 1 == src.queries
    assert shown.best.arch == res[3].best.arch


def test_the_archives_best_archs_within_the_budget_join_the_samples(trained):
    """``[inference] archive = k`` (decisions 41): the frontier archive's k most accurate archs
    within B are candidates beside the generator's samples, at no query; the evaluator (exact on
    them) picks, so the best is never below the best known arch within B; ``archive = 0`` ranks
    the samples alone."""
    tr, _ = trained
    src = open_accuracy_source("synthetic:", SP)
    budgets = list(np.linspace(LAT.fastest_ms * 1.2, LAT.slowest_ms * 0.9, 5))
    plain = NagModel(SP, TABLE, tr.evaluator, tr.generator, src, InferenceConfig(samples=3, archive=0), tr.archive)
    with_k = NagModel(SP, TABLE, tr.evaluator, tr.generator, src, InferenceConfig(samples=3, archive=2), tr.archive)
    ar = tr.archive
    gained = 0
    for b in budgets:
        p, w = plain.generate([b], display=False)[0], with_k.generate([b], display=False)[0]
        assert p.extra["archive_candidates"] == 0 and w.extra["archive_candidates"] == 2
        assert w.selection_queries == 0 == src.queries and w.best.latency_ms <= b
        inside = ar.latency_ms <= b
        top2 = {str(a) for a in ar.dec.select(np.flatnonzero(inside)[np.argsort(-ar.accuracy[inside])[:2]])
                .to_archs(SP)}
        assert top2 <= {str(c.arch) for c in w.candidates}  # both are ranked
        assert w.best.evaluator_score >= 100 * ar.accuracy[inside].max() - 1e-4  # exact (float32): never below the best known
        # the samples alone are the same draws: the archive only adds candidates
        assert {str(c.arch) for c in p.candidates} <= {str(c.arch) for c in w.candidates}
        gained += w.best.evaluator_score > p.best.evaluator_score
    assert gained >= 1  # 3 samples rarely find the best known arch: the archive's candidates matter


def test_a_budgets_result_does_not_depend_on_the_other_budgets(trained):
    tr, _ = trained
    m = NagModel(SP, TABLE, tr.evaluator, tr.generator, inference=InferenceConfig(samples=30))
    b = (LAT.fastest_ms + LAT.slowest_ms) / 2
    alone = m.generate([b], display=False)[0]
    mixed = m.generate([LAT.slowest_ms, b, LAT.fastest_ms * 1.5], display=False)[1]
    assert [str(c.arch) for c in alone.candidates] == [str(c.arch) for c in mixed.candidates]
    other_seed = m.generate([b], seed=5, display=False)[0]
    assert other_seed.n_sampled == alone.n_sampled


def test_budget_rules(trained):
    tr, _ = trained
    m = NagModel(SP, TABLE, tr.evaluator, tr.generator, inference=InferenceConfig(samples=20))
    top = m.generate([LAT.slowest_ms * 3], display=False)[0]
    assert top.effective_budget_ms == pytest.approx(LAT.slowest_ms) and "above the slowest network" in top.note
    assert top.budget_ms == LAT.slowest_ms * 3
    with pytest.raises(BudgetBelowRangeError, match="fastest"):
        m.generate([LAT.fastest_ms * 0.5])
    for bad in (math.nan, math.inf, 0.0, -1.0):
        with pytest.raises(BadInputError):
            m.generate([(LAT.fastest_ms + LAT.slowest_ms) / 2, bad])  # all budgets checked before any work


def test_search_queries_are_counted_and_capped(trained):
    tr, _ = trained
    src = open_accuracy_source("synthetic:", SP)
    m = NagModel(SP, TABLE, tr.evaluator, tr.generator, src, InferenceConfig(samples=30), tr.archive)
    b = (LAT.fastest_ms + LAT.slowest_ms) / 2
    r = m.generate([b], search_queries=40, display=False)[0]
    assert 0 < r.selection_queries <= 40 and r.selection_queries == src.queries
    assert all(c.latency_ms <= b for c in r.candidates)
    assert r.best.accuracy is not None  # chosen by its queried accuracy
    with pytest.raises(BadInputError):
        NagModel(SP, TABLE, tr.evaluator, tr.generator).generate([b], search_queries=5)


def test_artifacts_round_trip_and_a_mixed_set_is_refused(trained, tmp_path):
    tr, _ = trained
    paths = {k: tmp_path / f"{k}.{'jsonl' if k == 'archive' else 'pt'}" for k in ("evaluator", "generator", "archive")}
    header = {"nagkit_dataset": 1, "space": SP.name}
    save_trained(tr, paths, {"seed": 0}, header)
    m = NagModel.load(SP, TABLE, paths, inference=InferenceConfig(samples=25))
    b = (LAT.fastest_ms + LAT.slowest_ms) / 2
    ref = NagModel(SP, TABLE, tr.evaluator, tr.generator, inference=InferenceConfig(samples=25), archive=tr.archive)
    assert m.generate([b], display=False)[0].best.arch == ref.generate([b], display=False)[0].best.arch
    meta = json.loads(paths["generator"].with_suffix(".json").read_text())
    assert meta["provenance"]["evaluator_sha256"] and meta["schema"] == 2
    # a crash between the evaluator and the generator writes: a new evaluator beside the old generator
    other, _ = _train(seed=1)
    from nagkit.nag.train import save_model

    save_model(paths["evaluator"], other.evaluator, {"seed": 1}, {})
    with pytest.raises(ArtifactError, match="different training runs"):
        NagModel.load(SP, TABLE, paths)
