"""Budget checks, the grid and the interpolated budget embedding g(B)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nagkit.errors import BadInputError
from nagkit.nag.budgets import BudgetBelowRangeError, BudgetGrid, check_budget, make_embedding


def test_grid_is_evenly_spaced():
    g = BudgetGrid.evenly(10.0, 60.0, 6)
    assert g.values == (10.0, 20.0, 30.0, 40.0, 50.0, 60.0) and g.k == 6 and (g.lo, g.hi) == (10.0, 60.0)
    with pytest.raises(BadInputError):
        BudgetGrid.evenly(10.0, 10.0, 5)
    with pytest.raises(BadInputError):
        BudgetGrid.evenly(10.0, 20.0, 1)


def test_embedding_at_grid_points_is_the_grid_embedding():
    g = BudgetGrid.evenly(10.0, 50.0, 5)
    emb = make_embedding(g, 4)
    out = emb(torch.tensor(g.values))
    assert torch.allclose(out, emb.table)


def test_embedding_interpolates_linearly_between_grid_budgets():
    g = BudgetGrid.evenly(10.0, 50.0, 5)
    emb = make_embedding(g, 3)
    out = emb(torch.tensor([12.5, 40.0]))
    xi = (20.0 - 12.5) / 10.0  # g(B) = xi g(B1) + (1 - xi) g(B2)
    assert torch.allclose(out[0], xi * emb.table[0] + (1 - xi) * emb.table[1])
    assert torch.allclose(out[1], emb.table[3])
    # outside the grid the end embeddings are used
    assert torch.allclose(emb(torch.tensor([5.0, 99.0])), emb.table[[0, -1]])


def test_embedding_is_learned_through_interpolation():
    g = BudgetGrid.evenly(10.0, 50.0, 5)
    emb = make_embedding(g, 2)
    emb(torch.tensor([15.0])).sum().backward()
    grad = emb.table.grad
    assert grad[0].abs().sum() > 0 and grad[1].abs().sum() > 0 and grad[2:].abs().sum() == 0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0.0, -3.0, "abc", None])
def test_non_finite_or_non_positive_budget_is_bad_input(bad):
    with pytest.raises(BadInputError) as ei:
        check_budget(bad, 1.0, 9.0)
    assert not isinstance(ei.value, BudgetBelowRangeError) and ei.value.exit_code == 2


def test_budget_below_the_fastest_network_fails_naming_it():
    with pytest.raises(BudgetBelowRangeError) as ei:
        check_budget(0.5, 1.25, 9.0)
    assert ei.value.exit_code == 1 and "1.25 ms" in ei.value.message and "fastest" in ei.value.message


def test_budget_above_the_slowest_network_is_generated_for_the_slowest_and_said():
    assert check_budget(5.0, 1.0, 9.0) == (5.0, None)
    assert check_budget(9.0, 1.0, 9.0) == (9.0, None)
    b, note = check_budget(80.0, 1.0, 9.0)
    assert b == 9.0 and "above the slowest network" in note and "most accurate" in note


def test_stratified_draws_one_budget_per_slice():
    g = BudgetGrid.evenly(10.0, 50.0, 5)
    b = g.stratified(4, np.random.default_rng(0))
    assert all(10 + 10 * i <= x < 20 + 10 * i for i, x in enumerate(b))
