"""Budget grid and the interpolated budget embedding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.errors import BadInputError
from nagkit.nag.budgets import BudgetGrid, BudgetOutOfRangeError, make_embedding


def test_grid_is_evenly_spaced():
    g = BudgetGrid.evenly(10.0, 60.0, 6)
    assert g.values == (10.0, 20.0, 30.0, 40.0, 50.0, 60.0)
    with pytest.raises(BadInputError, match="k must be >= 2"):
        BudgetGrid.evenly(10, 60, 1)
    with pytest.raises(BadInputError, match="min < max"):
        BudgetGrid.evenly(60, 10, 4)


def test_embedding_at_grid_points_is_the_grid_embedding():
    g = BudgetGrid.evenly(10.0, 40.0, 4)
    emb = make_embedding(g, 8)
    out = emb(torch.tensor(g.values))
    torch.testing.assert_close(out, emb.table.detach())


def test_embedding_interpolates_linearly_between_grid_budgets():
    g = BudgetGrid.evenly(10.0, 40.0, 4)
    emb = make_embedding(g, 8)
    t = emb.table.detach()
    # B = 12.5 lies between B1 = 10 and B2 = 20: xi = (20 - 12.5) / 10 = 0.75
    torch.testing.assert_close(emb(torch.tensor([12.5]))[0], 0.75 * t[0] + 0.25 * t[1])
    # midpoints weigh both neighbours equally
    mids = torch.tensor([15.0, 25.0, 35.0])
    torch.testing.assert_close(emb(mids), 0.5 * (t[:-1] + t[1:]))
    i1, i2, xi = g.interpolation(np.array([12.5, 40.0, 10.0]))
    assert list(i1) == [0, 2, 0] and list(i2) == [1, 3, 1]
    np.testing.assert_allclose(xi, [0.75, 0.0, 1.0])


def test_embedding_is_learned_through_interpolation():
    g = BudgetGrid.evenly(10.0, 40.0, 4)
    emb = make_embedding(g, 4)
    emb(torch.tensor([15.0])).sum().backward()
    grad = emb.table.grad.abs().sum(dim=1)
    assert grad[0] > 0 and grad[1] > 0 and grad[2] == 0 and grad[3] == 0


@pytest.mark.parametrize("bad", [9.99, 40.5, float("nan")])
def test_out_of_range_budget_names_the_feasible_range(bad):
    g = BudgetGrid.evenly(10.0, 40.0, 4)
    with pytest.raises(BudgetOutOfRangeError) as ei:
        g.check([20.0, bad])
    assert "10.00..40.00 ms" in str(ei.value)
    assert ei.value.exit_code == 2
