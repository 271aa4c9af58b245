"""Shared set-up of the NAG tests: the tiny space with its MACs latency table and synthetic
accuracy, and a small evaluator trained on it."""

from __future__ import annotations

import numpy as np

from nagkit.data.synthetic import MacsLatencyTable, synthetic_accuracy, tiny_space
from nagkit.latency.slots import SlotLatency
from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import EvaluatorConfig
from nagkit.nag.evaluator import train_evaluator
from nagkit.space import sample_many
from nagkit.space.decisions import from_archs

SP = tiny_space()
TABLE = MacsLatencyTable()
LAT = SlotLatency(TABLE, SP)


def synthetic_data(n: int = 300, seed: int = 0):
    """``n`` uniform archs of SP with their table latency and synthetic accuracy."""
    archs = sample_many(SP, n, seed=seed)
    return archs, TABLE.predict_many(SP, archs), np.array([synthetic_accuracy(SP, a) for a in archs])


def grid(k: int = 5) -> BudgetGrid:
    """``k`` grid budgets over the tiny space's whole latency range on the table."""
    return BudgetGrid.evenly(LAT.fastest_ms, LAT.slowest_ms, k)


def small_evaluator(n: int, cfg: EvaluatorConfig, k: int = 5):
    """(evaluator, grid, (archs, lat, acc)): an evaluator trained with ``cfg`` on
    :func:`synthetic_data` (seed 0), over ``k`` grid budgets spanning the space's range."""
    archs, lat, acc = synthetic_data(n)
    g = grid(k)
    ev, _ = train_evaluator(SP, from_archs(SP, archs), lat, acc, g, cfg, embed_dim=8)
    return ev, g, (archs, lat, acc)
