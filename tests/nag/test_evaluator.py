"""The Pareto dominance function, the hinge ranking loss and evaluator training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.data.synthetic import MacsLatencyTable, synthetic_accuracy, tiny_space
from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import EvaluatorConfig
from nagkit.nag.features import onehot
from nagkit.space.decisions import from_archs
from nagkit.nag.evaluator import (Evaluator, dominance, dominance_target, ranking_loss, ranking_metrics,
                                  train_evaluator)
from nagkit.space import sample_many
from nagkit.space.encoding import onehot_encoding


def d_of(acc, lat, budget):
    return dominance(torch.tensor(acc), torch.tensor(lat), torch.tensor([budget]))[0]


def test_both_fit_orders_by_accuracy():
    d = d_of([0.8, 0.7], [10.0, 5.0], 20.0)
    assert d[0, 1] == 1 and d[1, 0] == -1  # beta_0 more accurate though slower


def test_equal_accuracy_when_both_fit_is_plus_one_both_ways():
    d = d_of([0.8, 0.8], [10.0, 5.0], 20.0)
    assert d[0, 1] == 1 and d[1, 0] == 1


def test_otherwise_orders_by_latency():
    one_fits = d_of([0.9, 0.7], [30.0, 5.0], 20.0)  # the accurate one is over budget
    assert one_fits[0, 1] == -1 and one_fits[1, 0] == 1
    none_fit = d_of([0.9, 0.7], [40.0, 30.0], 20.0)
    assert none_fit[0, 1] == -1 and none_fit[1, 0] == 1


def test_budget_on_the_boundary_fits():
    d = d_of([0.9, 0.7], [20.0, 5.0], 20.0)
    assert d[0, 1] == 1


def test_dominance_is_per_budget():
    d = dominance(torch.tensor([0.9, 0.7]), torch.tensor([30.0, 5.0]), torch.tensor([20.0, 40.0]))
    assert d.shape == (2, 2, 2)
    assert d[0, 0, 1] == -1 and d[1, 0, 1] == 1


def test_hinge_loss_values():
    d = d_of([0.9, 0.7], [10.0, 5.0], 20.0).unsqueeze(0)
    # scores agreeing with d by a margin >= 1 cost nothing
    assert ranking_loss(torch.tensor([[3.0, 1.0]]), d) == 0
    # equal scores: phi(0) = 1 for both ordered pairs
    assert ranking_loss(torch.tensor([[1.0, 1.0]]), d) == pytest.approx(1.0)
    # wrong order by 1: phi(-1) = 2 for both ordered pairs
    assert ranking_loss(torch.tensor([[0.0, 1.0]]), d) == pytest.approx(2.0)


def test_score_grid_equals_paired_scores():
    sp = tiny_space()
    grid = BudgetGrid.evenly(1.0, 5.0, 5)
    ev = Evaluator(sp, grid, EvaluatorConfig(hidden=16), embed_dim=8)
    archs = sample_many(sp, 6, seed=0)
    lat = MacsLatencyTable().predict_many(sp, archs)
    x = ev.features(from_archs(sp, archs), lat)
    b = torch.tensor([1.5, 4.0])
    g = ev.score_grid(x, b)
    for i in range(2):
        torch.testing.assert_close(g[i], ev.score(x, b[i].repeat(6)), rtol=1e-5, atol=1e-5)


def test_batch_onehot_matches_space_encoding():
    sp = tiny_space()
    archs = sample_many(sp, 25, seed=2)
    got = onehot(sp, from_archs(sp, archs)).numpy()
    np.testing.assert_array_equal(got, np.stack([onehot_encoding(sp, a) for a in archs]))
    assert [str(a) for a in from_archs(sp, archs).to_archs(sp)] == [str(a) for a in archs]


def test_dominance_without_the_accuracy_term_orders_by_latency_only():
    d = dominance(torch.tensor([0.9, 0.7]), torch.tensor([10.0, 5.0]), torch.tensor([20.0]), accuracy_term=False)[0]
    assert d[0, 1] == -1 and d[1, 0] == 1  # both fit, yet the faster one wins


@pytest.mark.parametrize("accuracy_term", [True, False])
def test_pointwise_target_orders_rows_as_the_dominance_does(accuracy_term):
    rng = np.random.default_rng(0)
    acc = torch.tensor(rng.uniform(0.6, 0.9, 40), dtype=torch.float32)
    lat = torch.tensor(rng.uniform(1.0, 30.0, 40), dtype=torch.float32)
    for b in (5.0, 15.0, 25.0):
        t = dominance_target(acc, lat, torch.full((40,), b), floor=60.0, accuracy_term=accuracy_term)
        d = dominance(acc, lat, torch.tensor([b]), accuracy_term)[0]
        diff = torch.sign(t[:, None] - t[None, :])
        nz = diff != 0  # ties in the target are ties in d (+1 both ways)
        assert (diff[nz] == d[nz]).all()


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["pointwise", "pairwise"])
def test_training_learns_to_rank_held_out_archs(loss):
    sp = tiny_space()
    archs = sample_many(sp, 500, seed=0)
    lat = MacsLatencyTable().predict_many(sp, archs)
    acc = np.array([synthetic_accuracy(sp, a) for a in archs])
    grid = BudgetGrid.evenly(float(lat.min()), float(lat.max()), 5)
    cfg = EvaluatorConfig(epochs=30, hidden=64, batch_size=64, holdout=0.2, loss=loss)
    dec = from_archs(sp, archs)
    untrained = Evaluator(sp, grid, cfg, embed_dim=8)
    with torch.no_grad():
        s0 = untrained.score_grid(untrained.features(dec, lat), torch.tensor(grid.values)).numpy()
    hold_idx = np.random.default_rng(cfg.seed).permutation(len(archs))[:100]
    before = ranking_metrics(s0[:, hold_idx], acc[hold_idx], lat[hold_idx], np.array(grid.values))
    _, rep = train_evaluator(sp, dec, lat, acc, grid, cfg, embed_dim=8)
    hold = rep["holdout"]
    assert rep["holdout_size"] == 100 and len(hold["per_budget"]) == 5 and rep["loss"] == loss
    assert hold["mean_pairwise_accuracy"] > 0.8 > before["mean_pairwise_accuracy"]
    assert hold["mean_kendall_tau"] > 0.6
