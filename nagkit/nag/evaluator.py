"""The Pareto-frontier-aware evaluator R(alpha | B; w).

Three fully connected layers over [arch encoding, budget embedding g(B), budget-relative
latency]. The Pareto dominance function (DESIGN.md) orders a set of archs for a budget B:
feasible archs (c <= B) by accuracy, all above the infeasible ones, those by latency (smaller
first). Two losses teach R that order:

- ``pairwise`` (the paper): the hinge phi(z) = max(0, 1 - z) over all pairs of a minibatch and
  several budgets, ``L = mean phi(d(beta_i, beta_j, B) [R(beta_i|B) - R(beta_j|B)])``;
- ``pointwise`` (the default, docs/decisions.md 17): R regresses onto a target whose order *is*
  the dominance order: ``100 * Acc`` for a feasible arch, ``floor - 20 (c/B - 1)`` below every
  accuracy for an infeasible one. Each row of a minibatch gets one budget, one it fits with
  probability ``feasible_share``. The hinge stops pushing once a pair is a margin apart, which
  leaves near-ties at the frontier unordered; the regression keeps ordering them.

``accuracy_term = false`` drops accuracy from the dominance (every pair ordered by latency),
the paper's Table 3 ablation. The arch encoding is the space's one-hot plus the table latency
divided by the top budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from nagkit.nag.budgets import BudgetGrid, make_embedding
from nagkit.nag.config import EvaluatorConfig, torch_threads
from nagkit.nag.features import onehot, onehot_dim
from nagkit.nag.optim import Adam, one_cycle
from nagkit.nag.rankstats import kendall_tau
from nagkit.space.decisions import Decisions
from nagkit.space.space import SearchSpace

N_REL = 2  # budget-relative latency features: (c - B) / B (clipped, x4) and c <= B
INFEASIBLE_GAP = 5.0  # points between the worst feasible target and the best infeasible one


def dominance(acc: torch.Tensor, lat: torch.Tensor, budgets: torch.Tensor, accuracy_term: bool = True) -> torch.Tensor:
    """d(beta_i, beta_j, B) for all budgets and pairs: a [m, n, n] tensor of +1/-1."""
    fit = lat.unsqueeze(0) <= budgets.unsqueeze(1)  # [m, n]
    both = fit.unsqueeze(2) & fit.unsqueeze(1)  # [m, n, n]
    lat_le = lat.unsqueeze(1) <= lat.unsqueeze(0)
    one = torch.ones((), dtype=torch.float32)
    by_lat = torch.where(lat_le, one, -one).expand_as(both)
    if not accuracy_term:
        return by_lat
    acc_ge = acc.unsqueeze(1) >= acc.unsqueeze(0)  # [n, n]
    return torch.where(both, torch.where(acc_ge, one, -one), by_lat)


def ranking_loss(scores: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Mean hinge phi(d_ij (s_i - s_j)) over budgets and ordered pairs i != j.

    ``scores`` is [m, n] (budget x arch), ``d`` is [m, n, n] from :func:`dominance`."""
    diff = scores.unsqueeze(2) - scores.unsqueeze(1)  # [m, n, n]: s_i - s_j
    hinge = torch.relu(1.0 - d * diff)
    n = scores.shape[1]
    off = 1.0 - torch.eye(n, dtype=hinge.dtype)
    return (hinge * off).sum() / (scores.shape[0] * n * (n - 1))


def dominance_target(acc: torch.Tensor, lat: torch.Tensor, budgets: torch.Tensor, floor: float,
                     accuracy_term: bool = True) -> torch.Tensor:
    """A value per (arch, budget) row whose order is the dominance order (see module doc)."""
    over = (lat / budgets - 1.0).clamp(min=0.0)
    infeasible = floor - INFEASIBLE_GAP - 20.0 * over
    if not accuracy_term:
        return floor - 20.0 * (lat / budgets)
    return torch.where(lat <= budgets, 100.0 * acc, infeasible)


class Evaluator(nn.Module):
    def __init__(self, space: SearchSpace, grid: BudgetGrid, cfg: EvaluatorConfig, embed_dim: int = 32):
        super().__init__()
        self.space, self.grid, self.cfg = space, grid, cfg
        self.arch_dim = onehot_dim(space) + 1
        self.embed = make_embedding(grid, embed_dim)
        self.embed_dim = embed_dim
        self.fc1 = nn.Linear(self.arch_dim + embed_dim + N_REL, cfg.hidden)
        self.fc2 = nn.Linear(cfg.hidden, cfg.hidden)
        self.fc3 = nn.Linear(cfg.hidden, 1)
        self.register_buffer("offset", torch.zeros(()))  # mean target, so outputs start near it

    def features(self, dec: Decisions, lat_ms: np.ndarray | torch.Tensor) -> torch.Tensor:
        lat = torch.as_tensor(np.asarray(lat_ms), dtype=torch.float32).reshape(-1, 1)
        return torch.cat([onehot(self.space, dec), lat / self.grid.hi], dim=1)

    def relative(self, x: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
        lat = x[..., -1] * self.grid.hi
        b = budgets.to(torch.float32)
        margin = ((lat - b) / b).clamp(-1.0, 1.0) * 4.0
        return torch.stack([margin, (lat <= b * (1 + 1e-6)).float()], dim=-1)

    def score(self, x: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
        """R(alpha_i | B_i) for paired rows: [n]."""
        b = budgets.to(torch.float32)
        h = torch.relu(self.fc1(torch.cat([x, self.embed(b), self.relative(x, b)], dim=1)))
        return self.fc3(torch.relu(self.fc2(h))).squeeze(-1) + self.offset

    def score_grid(self, x: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
        """R for every (budget, arch) pair: [m, n] (the first layer split, so the arch and budget
        halves are computed once each)."""
        w = self.fc1.weight
        a, e = self.arch_dim, self.arch_dim + self.embed_dim
        b = budgets.to(torch.float32)
        pre = (x @ w[:, :a].T).unsqueeze(0) + (self.embed(b) @ w[:, a:e].T + self.fc1.bias).unsqueeze(1)
        pre = pre + self.relative(x.unsqueeze(0), b.unsqueeze(1)) @ w[:, e:].T
        h = torch.relu(self.fc2(torch.relu(pre)))
        return self.fc3(h).squeeze(-1) + self.offset

    def config_dict(self) -> dict[str, Any]:
        return {"evaluator": asdict(self.cfg), "grid": self.grid.to_dict(),
                "embed_dim": self.embed.table.shape[1], "space": self.space.to_dict()}


def train_evaluator(space: SearchSpace, dec: Decisions, lat: np.ndarray, acc: np.ndarray, grid: BudgetGrid,
                    cfg: EvaluatorConfig, embed_dim: int = 32,
                    progress: Callable[[int, int, float], None] | None = None,
                    init: Evaluator | None = None) -> tuple[Evaluator, dict]:
    """Train R on a dataset (or go on training ``init`` for ``cfg.epochs``); returns the model
    and a report with held-out ranking metrics."""
    with torch_threads():
        return _train(space, dec, np.asarray(lat, float), np.asarray(acc, float), grid, cfg, embed_dim, progress,
                      init)


def _train(space, dec, lat, acc, grid, cfg, embed_dim, progress, init=None):
    rng = np.random.default_rng(cfg.seed)
    n = len(dec)
    perm = rng.permutation(n)
    n_hold = int(round(n * cfg.holdout)) if n >= 40 else 0
    hold, train = perm[:n_hold], perm[n_hold:]
    if init is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            model = Evaluator(space, grid, cfg, embed_dim)
    else:
        model = init
        for p in model.parameters():
            p.requires_grad_(True)
    x_all = model.features(dec, lat)
    lat_t, acc_t = torch.as_tensor(lat, dtype=torch.float32), torch.as_tensor(acc, dtype=torch.float32)
    floor = float(100 * acc.min())
    if init is None:
        model.offset.fill_(float(100 * acc.mean()) if cfg.accuracy_term else floor - 20.0)
    opt = Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    bs = max(1, min(cfg.batch_size, len(train)))
    steps_per_epoch = max(1, len(train) // bs)
    epochs = cfg.epochs if init is not None else max(cfg.epochs, -(-cfg.min_steps // steps_per_epoch))
    total = epochs * steps_per_epoch
    sched = one_cycle(total, cfg.lr, max(0.1, 2 / total)) if total >= 4 else None  # else a constant lr
    lo, hi = grid.lo, grid.hi
    t0, loss_v = time.perf_counter(), math.nan
    model.train()
    for epoch in range(epochs):
        order = train[rng.permutation(len(train))]
        for b in range(steps_per_epoch):
            idx = torch.from_numpy(order[b * bs:(b + 1) * bs])
            if cfg.loss == "pointwise":
                bud = torch.from_numpy(_row_budgets(lat[idx.numpy()], lo, hi, cfg.feasible_share, rng)).float()
                target = dominance_target(acc_t[idx], lat_t[idx], bud, floor, cfg.accuracy_term)
                loss = (model.score(x_all[idx], bud) - target).pow(2).mean()
            else:
                bud = torch.from_numpy(lo + rng.random(cfg.pairwise_budgets) * (hi - lo)).float()
                s = model.score_grid(x_all[idx], bud)
                loss = ranking_loss(s, dominance(acc_t[idx], lat_t[idx], bud, cfg.accuracy_term))
            opt.zero_grad()
            loss.backward()
            if sched is not None:
                opt.lr, opt.beta1 = sched[epoch * steps_per_epoch + b]
            opt.step()
            loss_v = float(loss.detach())
        if progress:
            progress(epoch + 1, epochs, loss_v)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    report: dict[str, Any] = {"train_size": int(len(train)), "holdout_size": int(n_hold), "steps": total,
                              "final_loss": loss_v, "seconds": time.perf_counter() - t0, "loss": cfg.loss}
    if n_hold >= 10:
        with torch.no_grad():
            s = model.score_grid(x_all[torch.from_numpy(hold)], torch.tensor(grid.values)).numpy()
        report["holdout"] = ranking_metrics(s, acc[hold], lat[hold], np.asarray(grid.values))
    return model, report


def _row_budgets(lat: np.ndarray, lo: float, hi: float, feasible_share: float, rng: np.random.Generator) -> np.ndarray:
    """One budget per row: with probability ``feasible_share`` uniform in [c, hi] (the arch
    fits), else uniform in [lo, c)."""
    u = rng.random(len(lat))
    fit = rng.random(len(lat)) < feasible_share
    above = lat + u * np.maximum(hi - lat, 0.0)
    below = lo + u * np.maximum(lat - lo, 0.0) * 0.999
    return np.where(fit, above, below)


def ranking_metrics(scores: np.ndarray, acc: np.ndarray, lat: np.ndarray, budgets: np.ndarray) -> dict[str, Any]:
    """Per budget: pairwise ranking accuracy against d(.,.,B) and Kendall tau of R against the
    true order (feasible archs by accuracy, above infeasible ones by latency); also tau among
    the feasible archs only."""
    per = []
    iu = np.triu_indices(len(acc), k=1)
    for bi, B in enumerate(budgets):
        s = scores[bi]
        fit = lat <= B
        both = fit[:, None] & fit[None, :]
        d = np.where(both, np.sign(acc[:, None] - acc[None, :]), np.sign(lat[None, :] - lat[:, None]))
        pred = np.sign(s[:, None] - s[None, :])
        valid = d[iu] != 0
        pair_acc = float((pred[iu][valid] == d[iu][valid]).mean()) if valid.any() else math.nan
        util = np.where(fit, acc, -1.0 - lat)  # any feasible arch beats every infeasible one
        tau = kendall_tau(s, util)
        tau_fit = kendall_tau(s[fit], acc[fit]) if fit.sum() >= 3 else math.nan
        per.append({"budget_ms": float(B), "pairwise_accuracy": pair_acc, "kendall_tau": tau,
                    "kendall_tau_feasible": tau_fit, "n_feasible": int(fit.sum())})
    return {"per_budget": per,
            "mean_pairwise_accuracy": float(np.nanmean([p["pairwise_accuracy"] for p in per])),
            "mean_kendall_tau": float(np.nanmean([p["kendall_tau"] for p in per])),
            "mean_kendall_tau_feasible": float(np.nanmean([p["kendall_tau_feasible"] for p in per]))}
