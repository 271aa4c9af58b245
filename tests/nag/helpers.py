"""Shared set-up of the NAG tests: the tiny space with its MACs latency table and synthetic
accuracy, and a small evaluator trained on it."""

from __future__ import annotations

import numpy as np

from nagkit.data.synthetic import MacsLatencyTable, synthetic_accuracy, tiny_space
from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import EvaluatorConfig
from nagkit.nag.decisions import from_archs
from nagkit.nag.evaluator import train_evaluator
from nagkit.space import sample_many

SP = tiny_space()
TABLE = MacsLatencyTable()


def synthetic_data(n: int = 300, seed: int = 0):
    """``n`` uniform archs of SP with their table latency and synthetic accuracy."""
    archs = sample_many(SP, n, seed=seed)
    return archs, TABLE.predict_many(SP, archs), np.array([synthetic_accuracy(SP, a) for a in archs])


def small_evaluator(n: int, cfg: EvaluatorConfig, k: int = 5):
    """(evaluator, grid, (archs, lat, acc)): an evaluator trained with ``cfg`` on
    :func:`synthetic_data` (seed 0), over ``k`` grid budgets spanning its latency range."""
    archs, lat, acc = synthetic_data(n)
    grid = BudgetGrid.evenly(float(lat.min()), float(lat.max()), k)
    ev, _ = train_evaluator(SP, from_archs(SP, archs), lat, acc, grid, cfg, embed_dim=8)
    return ev, grid, (archs, lat, acc)
