"""The generator: constrained decoding (every sample fits), teacher forcing, imitation, REINFORCE."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.nag.archive import Archive
from nagkit.nag.config import EvaluatorConfig, GeneratorConfig
from nagkit.nag.generator import Generator, imitate, reinforce, sample_archs
from nagkit.nag.train import evaluator_reward
from nagkit.space import get_space
from nagkit.space.decisions import from_archs
from tests.nag.helpers import LAT, SP, TABLE, grid, small_evaluator, synthetic_data

CFG = GeneratorConfig(hidden=32, token_dim=8, imitation_steps=60, imitation_batch=64, steps=40,
                      budgets_per_step=4, samples_per_budget=16, seed=0)


def fresh(cfg=CFG, space=SP, latency=LAT, k=5):
    torch.manual_seed(0)
    from nagkit.nag.budgets import BudgetGrid

    g = BudgetGrid.evenly(latency.fastest_ms, latency.slowest_ms, k)
    return Generator(space, g, cfg, embed_dim=8).bind(latency)


def budgets_across(latency, n=25):
    return np.linspace(latency.fastest_ms, latency.slowest_ms * 1.2, n)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_every_sample_fits_its_budget_by_construction(temperature):
    gen = fresh()
    b = budgets_across(LAT)
    dec, bud = sample_archs(gen, b, 64, seed=1, temperature=temperature)
    lat = LAT(dec)
    assert (lat <= bud + 1e-9).all()
    for a in dec.to_archs(SP):
        SP.validate(a)
    # at the fastest network's latency only that network fits
    tight = bud == b[0]
    assert len({str(a) for a, t in zip(dec.to_archs(SP), tight) if t}) == 1


def test_every_sample_fits_on_a_calibrated_paper_scale_table():
    from pathlib import Path

    from nagkit.latency.slots import SlotLatency
    from nagkit.latency.table import LatencyTable

    root = Path(__file__).resolve().parents[2]
    space = get_space("ofa-mbv3-w1.2")
    lat = SlotLatency(LatencyTable.load(root / "nagkit" / "resources" / "latency_tables" / "note10.json"), space)
    gen = fresh(GeneratorConfig(hidden=16, token_dim=4), space, lat)
    b = budgets_across(lat, 12)
    dec, bud = sample_archs(gen, b, 50, seed=2)
    assert (lat(dec) <= bud + 1e-9).all()


def test_undecided_slots_take_token_zero_and_cost_no_probability():
    gen = fresh()
    b = torch.full((200,), float(LAT.slowest_ms))
    dec, logp, ent = gen(b, generator=torch.Generator().manual_seed(3))
    act = dec.active(SP)
    assert (dec.k[~act] == 0).all() and (dec.e[~act] == 0).all()
    # teacher forcing reproduces the sampled log-probabilities
    torch.testing.assert_close(gen.log_prob(b, dec), logp)
    # latent values beyond a stage's depth do not change log pi(alpha | B)
    other = dec.copy()
    other.k[~act] = 1
    torch.testing.assert_close(gen.log_prob(b, other), logp)
    assert (ent > 0).all()


def test_greedy_rows_are_the_most_likely_decode():
    gen = fresh()
    dec, _ = sample_archs(gen, [LAT.slowest_ms * 0.6], 20, seed=4, greedy=True)
    again, _ = sample_archs(gen, [LAT.slowest_ms * 0.6], 5, seed=99, greedy=True)
    assert dec.to_archs(SP)[0] == again.to_archs(SP)[0]


@pytest.mark.slow
def test_imitation_raises_the_likelihood_of_the_archive():
    archs, lat, acc = synthetic_data(400)
    arc = Archive.from_decisions(from_archs(SP, archs), lat, acc, 3)
    g = grid()
    draw = arc.targets(g.lo, g.hi, 3)
    rng = np.random.default_rng(5)
    bud, dec = draw(256, rng)
    assert (lat_of := LAT(dec)).shape == (256,) and (lat_of <= bud).all()
    gen = fresh()
    before = float(gen.log_prob(torch.from_numpy(bud), dec).mean().detach())
    rep = imitate(gen, draw, CFG, seed=0)
    after = float(gen.log_prob(torch.from_numpy(bud), dec).mean().detach())
    assert after > before + 1.0 and rep["steps"] == CFG.imitation_steps


@pytest.mark.slow
def test_reinforce_improves_the_evaluator_reward_and_is_seeded():
    ev, g, _ = small_evaluator(300, EvaluatorConfig(epochs=8, hidden=32, batch_size=64))
    reward = evaluator_reward(ev, LAT)

    def mean_reward(gen):
        dec, bud = sample_archs(gen, np.linspace(g.lo * 1.2, g.hi, 8), 64, seed=7)
        return float(reward(dec, bud).mean())

    gen = fresh()
    before = mean_reward(gen)
    rep = reinforce(gen, (g.lo, g.hi), CFG, reward, seed=0)
    assert mean_reward(gen) > before and rep["steps"] == CFG.steps
    twin = fresh()
    reinforce(twin, (g.lo, g.hi), CFG, reward, seed=0)
    for a, b in zip(gen.state_dict().values(), twin.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["mnasnet", "tunas"])
def test_baseline_rewards_use_the_evaluators_accuracy_estimate(kind):
    ev, g, _ = small_evaluator(200, EvaluatorConfig(epochs=2, hidden=16, batch_size=64))
    archs, lat, _ = synthetic_data(20, seed=3)
    dec = from_archs(SP, archs)
    bud = lat * 1.5
    with torch.no_grad():
        a = ev.score(ev.features(dec, lat), torch.full((20,), g.hi)).double()
    r = evaluator_reward(ev, LAT, kind, -0.07)(dec, bud).double()
    ratio = torch.from_numpy(lat / bud)
    want = a * ratio ** -0.07 if kind == "mnasnet" else a - 7.0 * (ratio - 1).abs()
    torch.testing.assert_close(r, want, rtol=1e-5, atol=1e-4)


def test_flushing_denormals_changes_no_sample():
    """Generation flushes denormal floats (nag/config.py flush_denormals: 2x faster on one table);
    the samples must be the ones IEEE arithmetic gives."""
    from nagkit.nag.config import flush_denormals

    gen = fresh()
    b = budgets_across(LAT)
    ieee, _ = sample_archs(gen, b, 64, seed=4)
    with flush_denormals():
        flushed, _ = sample_archs(gen, b, 64, seed=4)
    for f in ("r", "depth", "k", "e"):
        assert np.array_equal(getattr(ieee, f), getattr(flushed, f)), f
    assert torch.tensor(1e-40).item() != 0.0  # and the default is back afterwards


def test_fused_teacher_forcing_equals_the_step_by_step_decode_with_its_gradients():
    """log_prob runs the LSTM over the whole sequence at once (decisions 37): the same values and
    gradients as scoring the actions step by step, at budgets that mask choices."""
    gen = fresh()
    b = torch.from_numpy(budgets_across(LAT, 64)).repeat_interleave(3)
    dec, logp_sampled, _ = gen(b, generator=torch.Generator().manual_seed(7))
    stepwise = gen(b, actions=dec, stats=False)[1]
    torch.testing.assert_close(stepwise, logp_sampled)
    gen.zero_grad()
    stepwise.sum().backward()
    want = {k: p.grad.clone() for k, p in gen.named_parameters() if p.grad is not None}
    gen.zero_grad()
    fused = gen.log_prob(b, dec)
    torch.testing.assert_close(fused, stepwise, rtol=1e-5, atol=1e-4)
    fused.sum().backward()
    for k, p in gen.named_parameters():
        if k in want:
            torch.testing.assert_close(p.grad, want[k], rtol=1e-4, atol=1e-4)
