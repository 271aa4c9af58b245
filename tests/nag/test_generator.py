"""The LSTM generator: valid archs, REINFORCE improves the evaluator's reward, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.data.synthetic import MacsLatencyTable, tiny_space
from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import EvaluatorConfig, GeneratorConfig
from nagkit.nag.decisions import from_archs
from nagkit.nag.generator import Generator, sample_archs, train_generator
from nagkit.nag.train import evaluator_reward
from nagkit.space import sample_many
from tests.nag.helpers import small_evaluator

SP = tiny_space()
TABLE = MacsLatencyTable()


@pytest.fixture(scope="module")
def trained_evaluator():
    ev, grid, _ = small_evaluator(400, EvaluatorConfig(epochs=10, hidden=64, batch_size=64))
    for p in ev.parameters():
        p.requires_grad_(False)
    return ev, grid


def test_samples_are_valid_archs_of_the_space():
    grid = BudgetGrid.evenly(1.0, 5.0, 3)
    gen = Generator(SP, grid, GeneratorConfig(hidden=16), embed_dim=8)
    dec, bud = sample_archs(gen, np.array([1.0, 3.3, 5.0]), 20, seed=0)
    archs = dec.to_archs(SP)
    assert len(archs) == 60 and list(bud[:20]) == [1.0] * 20
    for a in archs:
        SP.validate(a)
    assert len({str(a) for a in archs}) > 30  # an untrained policy explores


def test_log_prob_ignores_slots_beyond_depth():
    grid = BudgetGrid.evenly(1.0, 5.0, 3)
    gen = Generator(SP, grid, GeneratorConfig(hidden=16), embed_dim=8)
    dec, logp, ent = gen(torch.full((200,), 2.0), generator=torch.Generator().manual_seed(0))
    n_dec = 1 + SP.n_stages + 2 * np.asarray(SP.depth_list)[dec.depth].sum(axis=1)  # r, depths, live k/e
    # log-probability of uniform-ish choices is about -n_dec * log(2); inactive slots add nothing
    np.testing.assert_allclose(-logp.detach().numpy() / np.log(2), n_dec, rtol=0.25)
    assert (ent > 0).all()


@pytest.mark.slow
def test_reinforce_improves_the_evaluator_reward(trained_evaluator):
    ev, grid = trained_evaluator
    reward = evaluator_reward(ev, TABLE, SP)
    cfg = GeneratorConfig(hidden=32, steps=80, budgets_per_step=5, samples_per_budget=16, lr=5e-3)
    gen, rep = train_generator(SP, grid, cfg, reward, embed_dim=8, log_every=10)
    hist = rep["history"]
    first = np.mean([h["reward"] for h in hist[:2]])
    last = np.mean([h["reward"] for h in hist[-2:]])
    assert last > first + 0.5
    assert hist[-1]["entropy"] < hist[0]["entropy"]
    # and the trained generator meets budgets far more often than the untrained one
    b = np.array(grid.values[1:])
    fresh = Generator(SP, grid, cfg, embed_dim=8)
    rates = []
    for g in (fresh, gen):
        dec, bud = sample_archs(g, b, 100, seed=1)
        rates.append(float((TABLE.predict_many(SP, dec.to_archs(SP)) <= bud).mean()))
    assert rates[1] > rates[0] and rates[1] >= 0.9


@pytest.mark.slow
def test_same_seed_same_generator_and_archs(trained_evaluator):
    ev, grid = trained_evaluator
    reward = evaluator_reward(ev, TABLE, SP)
    cfg = GeneratorConfig(hidden=16, steps=10, budgets_per_step=3, samples_per_budget=8, seed=3)
    g1, _ = train_generator(SP, grid, cfg, reward, embed_dim=8)
    g2, _ = train_generator(SP, grid, cfg, reward, embed_dim=8)
    for (k, a), (_, b) in zip(g1.state_dict().items(), g2.state_dict().items()):
        assert torch.equal(a, b), k
    a1 = sample_archs(g1, np.array([grid.values[2]]), 5, seed=0)[0].to_archs(SP)
    a2 = sample_archs(g2, np.array([grid.values[2]]), 5, seed=0)[0].to_archs(SP)
    assert a1 == a2


def test_infeasible_penalty_only_hits_archs_over_budget(trained_evaluator):
    ev, grid = trained_evaluator
    archs = sample_many(SP, 50, seed=4)
    dec = from_archs(SP, archs)
    lat = TABLE.predict_many(SP, archs)
    b = np.full(50, float(np.median(lat)))
    plain = evaluator_reward(ev, TABLE, SP)(dec, b).numpy()
    pen = evaluator_reward(ev, TABLE, SP, infeasible_penalty=3.0)(dec, b).numpy()
    over = lat > b
    np.testing.assert_allclose(pen[~over], plain[~over], rtol=1e-6)
    assert np.all(pen[over] <= plain[over] - 3.0 + 1e-5)
