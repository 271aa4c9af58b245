"""The frontier archive (docs/decisions.md 15): which archs it keeps, its file format, the
training-time refinement search that fills it, and the second search population it seeds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.data.accuracy import open_accuracy_source
from nagkit.data.synthetic import synthetic_accuracy
from nagkit.errors import ArtifactError
from nagkit.nag.archive import Archive, frontier_layers
from nagkit.nag.config import BudgetConfig, EvaluatorConfig, GeneratorConfig, InferenceConfig
from nagkit.nag.generator import Generator
from nagkit.nag.infer import NagModel
from tests.nag.helpers import SP, TABLE, small_evaluator, synthetic_data


@pytest.mark.parametrize("k", [1, 3, 10])
def test_frontier_layers_hold_every_budgets_top_k(k):
    rng = np.random.default_rng(k)
    lat, acc = rng.random(400) * 10, rng.random(400)
    keep = set(frontier_layers(lat, acc, k).tolist())
    assert len(keep) < 400
    for b in np.linspace(0.2, 10, 40):
        ok = np.flatnonzero(lat <= b)
        top = ok[np.argsort(-acc[ok])[:k]]
        assert set(top.tolist()) <= keep
    # and nothing else: each kept arch is in the top k of its own latency
    for i in keep:
        assert (acc[lat <= lat[i]] > acc[i]).sum() < k


def test_archive_seeds_save_and_load(tmp_path):
    archs, lat, acc = synthetic_data()
    ar = Archive.from_arrays(SP, archs, lat, acc, 5)
    budgets = np.quantile(lat, [0.2, 0.5, 0.9])
    dec, grp, sacc = ar.seeds(budgets, 5)
    got = dec.to_archs(SP)
    for i, b in enumerate(budgets):
        ok = np.flatnonzero(lat <= b)
        want = {str(archs[j]) for j in ok[np.argsort(-acc[ok])[:5]]}
        assert {str(a) for a, g in zip(got, grp) if g == i} == want
    np.testing.assert_allclose(sacc, [synthetic_accuracy(SP, a) for a in got])
    path = ar.save(tmp_path / "archive.jsonl", SP, {"nagkit_dataset": 1, "space": SP.name})
    back = Archive.load(path, SP)
    assert len(back) == len(ar) and np.allclose(back.accuracy, ar.accuracy)
    d2, g2, _ = back.seeds(budgets, 5)
    assert [str(a) for a in d2.to_archs(SP)] == [str(a) for a in got] and (g2 == grp).all()
    path.write_text(path.read_text().replace('"accuracy"', '"acc"', 1))
    with pytest.raises(ArtifactError, match="corrupt"):
        Archive.load(path, SP)


def _trained(refine_search_queries, src):
    from nagkit.nag.train import train_models

    archs, lat, acc = synthetic_data(400, seed=1)
    gc = GeneratorConfig(hidden=16, steps=20, refine_rounds=2, refine_samples=20, refine_budgets=4, refine_pool=20,
                         refine_epochs=1, refine_steps=5, refine_search_queries=refine_search_queries,
                         refine_search_seeds=4, refine_search_rounds=3, refine_search_from=0.5)
    return train_models(SP, TABLE, archs, lat, acc, budgets=BudgetConfig(k=4, embed_dim=8),
                        evaluator_cfg=EvaluatorConfig(epochs=2, hidden=32, batch_size=64, budget_feature=True),
                        generator_cfg=gc, source=src)


def test_refinement_search_counts_queries_and_fills_the_archive():
    src0, src1 = open_accuracy_source("synthetic:", SP), open_accuracy_source("synthetic:", SP)
    _, _, rep0 = _trained(0, src0)
    ev, gen, rep1 = _trained(6, src1)
    assert rep0["archive"] is None and rep1["archive"] is not None
    extra = rep1["refinement_queries"] - rep0["refinement_queries"]
    assert 0 < extra <= 2 * 4 * 6  # rounds x budgets x cap
    assert rep1["refinement_queries"] == src1.queries
    ar = rep1["archive"]
    # the archive holds real accuracies (the synthetic source's) and table latencies
    archs = ar.dec.to_archs(SP)
    assert np.allclose(ar.accuracy, [synthetic_accuracy(SP, a) for a in archs])
    assert np.allclose(ar.latency_ms, TABLE.predict_many(SP, archs))


def test_generate_with_archive_population_counts_queries_and_stays_within_budget():
    ev, grid, (archs, lat, acc) = small_evaluator(
        300, EvaluatorConfig(epochs=3, hidden=32, batch_size=64, budget_feature=True))
    gen = Generator(SP, grid, GeneratorConfig(hidden=16), embed_dim=8)
    base = dict(search_rounds=4, search_queries=12, search_children=10, search_parents=3, search_screen=3,
                search_repair=2, search_max_changes=3)
    budgets = list(grid.values[1:])
    ar = Archive.from_arrays(SP, archs, lat, acc, 4)
    src = open_accuracy_source("synthetic:", SP)
    m = NagModel(SP, TABLE, ev, gen, src, inference=InferenceConfig(**base, archive_seeds=4), archive=ar)
    res = m.generate(budgets, samples=30, rerank=6, top=2, seed=3)
    best_archive = [acc[lat <= b].max() for b in budgets]
    for r, b, top in zip(res, budgets, best_archive):
        assert all(c.latency_ms <= b for c in r.candidates)
        assert r.queries <= 6 + 4 + 12  # re-rank + archive seeds (re-queried) + search cap
        assert r.best.accuracy >= top - 1e-9  # never worse than the archive's best within B
    assert src.queries == sum(r.queries for r in res)
    again = m.generate(budgets, samples=30, rerank=6, top=2, seed=3)
    assert [str(r.best.arch) for r in res] == [str(r.best.arch) for r in again]


def test_archive_seeds_without_the_artifact_is_a_clear_error(tmp_path):
    from nagkit.workspace import load_workspace

    ws = tmp_path / "w"
    ws.mkdir()
    (ws / "nagkit.toml").write_text('name = "t"\nspace = "ofa-mbv3-w1.2"\nlatency_table = "synthetic:"\n'
                                   'accuracy = "synthetic:"\n[inference]\narchive_seeds = 5\nsearch_queries = 10\n'
                                   'search_rounds = 2\n')
    w = load_workspace(str(ws))
    assert w.inference.archive_seeds == 5
    with pytest.raises(ArtifactError) as e:
        w.require_artifact("archive")
    assert "archive.jsonl" in str(e.value) and "refine_search_queries" in e.value.hint
    assert json.dumps(w.summary()["artifacts"]).count("archive.jsonl") == 1


def test_archive_share_out_of_range_is_refused(tmp_path):
    from nagkit.errors import BadInputError
    from nagkit.workspace import load_workspace

    ws = tmp_path / "w"
    ws.mkdir()
    (ws / "nagkit.toml").write_text('name = "t"\nspace = "ofa-mbv3-w1.2"\nlatency_table = "synthetic:"\n'
                                   'accuracy = "synthetic:"\n[inference]\narchive_share = 1.5\n')
    with pytest.raises(BadInputError, match="archive_share must be between 0 and 1, got 1.5"):
        load_workspace(str(ws))
