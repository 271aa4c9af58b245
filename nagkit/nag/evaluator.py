"""The Pareto-frontier-aware evaluator R(alpha | B; w).

Three fully connected layers over [arch encoding, budget embedding g(B)], trained with the
paper's pairwise hinge ranking loss over all pairs of a minibatch and all budgets::

    L(w) = mean_{B, i != j} phi( d(beta_i, beta_j, B) * [R(beta_i|B) - R(beta_j|B)] ),
    phi(z) = max(0, 1 - z),

with the Pareto dominance function (DESIGN.md) ``d = +1`` if both fit B and
Acc_i >= Acc_j, ``-1`` if both fit and Acc_i < Acc_j, otherwise ``+1`` if c_i <= c_j else ``-1``.

The arch encoding is :func:`nagkit.nag.decisions.onehot` (the space's general one-hot),
optionally followed by the table latency divided by the top budget (``latency_feature``).
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
from nagkit.nag.config import torch_threads, EvaluatorConfig
from nagkit.nag.decisions import Decisions, onehot, onehot_dim
from nagkit.space.space import SearchSpace


N_REL = 2  # budget-relative latency features (EvaluatorConfig.budget_feature)


def dominance(acc: torch.Tensor, lat: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
    """d(beta_i, beta_j, B) for all budgets and pairs: a [m, n, n] tensor of +1/-1."""
    fit = lat.unsqueeze(0) <= budgets.unsqueeze(1)  # [m, n]
    both = fit.unsqueeze(2) & fit.unsqueeze(1)  # [m, n, n]
    acc_ge = acc.unsqueeze(1) >= acc.unsqueeze(0)  # [n, n]
    lat_le = lat.unsqueeze(1) <= lat.unsqueeze(0)
    one = torch.ones((), dtype=torch.float32)
    return torch.where(both, torch.where(acc_ge, one, -one), torch.where(lat_le, one, -one).expand_as(both))


def ranking_loss(scores: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Mean hinge phi(d_ij (s_i - s_j)) over budgets and ordered pairs i != j.

    ``scores`` is [m, n] (budget x arch), ``d`` is [m, n, n] from :func:`dominance`."""
    diff = scores.unsqueeze(2) - scores.unsqueeze(1)  # [m, n, n]: s_i - s_j
    hinge = torch.relu(1.0 - d * diff)
    n = scores.shape[1]
    off = 1.0 - torch.eye(n, dtype=hinge.dtype)
    return (hinge * off).sum() / (scores.shape[0] * n * (n - 1))


class Evaluator(nn.Module):
    def __init__(self, space: SearchSpace, grid: BudgetGrid, cfg: EvaluatorConfig, embed_dim: int = 32):
        super().__init__()
        self.space, self.grid, self.cfg = space, grid, cfg
        self.arch_dim = onehot_dim(space) + (1 if cfg.latency_feature else 0)
        if cfg.budget_feature and not cfg.latency_feature:
            from nagkit.errors import BadInputError

            raise BadInputError("evaluator.budget_feature needs evaluator.latency_feature = true")
        self.n_rel = N_REL if cfg.budget_feature else 0
        self.embed = make_embedding(grid, embed_dim)
        self.embed_dim = embed_dim
        self.fc1 = nn.Linear(self.arch_dim + embed_dim + self.n_rel, cfg.hidden)
        self.fc2 = nn.Linear(cfg.hidden, cfg.hidden)
        self.fc3 = nn.Linear(cfg.hidden, 1)
        self.aux = nn.Linear(cfg.hidden, 1) if cfg.aux_regression > 0 else None

    def features(self, dec: Decisions, lat_ms: np.ndarray | torch.Tensor) -> torch.Tensor:
        x = onehot(self.space, dec)
        if self.cfg.latency_feature:
            lat = torch.as_tensor(np.asarray(lat_ms), dtype=torch.float32).reshape(-1, 1)
            x = torch.cat([x, lat / self.grid.hi], dim=1)
        return x

    def relative(self, x: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
        """Budget-relative latency features [..., N_REL] (``budget_feature``): the margin
        ``(c - B) / B`` (clipped to +-1, times 4) and the indicator ``c <= B``. ``x`` rows carry
        the latency feature ``c / B_K`` last; ``budgets`` broadcasts against ``x[..., -1]``."""
        lat = x[..., -1] * self.grid.hi
        b = budgets.to(torch.float32)
        margin = ((lat - b) / b).clamp(-1.0, 1.0) * 4.0
        return torch.stack([margin, (lat <= b + 1e-6).float()], dim=-1)

    def score_grid(self, x: torch.Tensor, budgets: torch.Tensor, with_aux: bool = False):
        """R for every (budget, arch) pair: [m, n]. The first layer is split so the arch and
        budget halves are computed once each. ``with_aux`` also returns the auxiliary
        accuracy regression (percent) [m, n]."""
        w = self.fc1.weight
        a, e = self.arch_dim, self.arch_dim + self.embed_dim
        xa = x @ w[:, :a].T  # [n, h]
        gb = self.embed(budgets) @ w[:, a:e].T + self.fc1.bias  # [m, h]
        pre = xa.unsqueeze(0) + gb.unsqueeze(1)
        if self.n_rel:
            pre = pre + self.relative(x.unsqueeze(0), budgets.unsqueeze(1)) @ w[:, e:].T
        h = torch.relu(pre)
        h = torch.relu(self.fc2(h))
        if with_aux:
            return self.fc3(h).squeeze(-1), self.aux(h).squeeze(-1)
        return self.fc3(h).squeeze(-1)

    def score(self, x: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
        """R(alpha_i | B_i) for paired rows: [n]."""
        parts = [x, self.embed(budgets)]
        if self.n_rel:
            parts.append(self.relative(x, budgets))
        h = torch.relu(self.fc1(torch.cat(parts, dim=1)))
        return self.fc3(torch.relu(self.fc2(h))).squeeze(-1)

    def config_dict(self) -> dict[str, Any]:
        return {"evaluator": asdict(self.cfg), "grid": self.grid.to_dict(),
                "embed_dim": self.embed.table.shape[1], "space": self.space.to_dict()}


def _train_evaluator(space: SearchSpace, dec: Decisions, lat: np.ndarray, acc: np.ndarray, grid: BudgetGrid,
                    cfg: EvaluatorConfig, embed_dim: int = 32,
                    progress: Callable[[int, int, float], None] | None = None,
                    model: Evaluator | None = None, epochs: int | None = None,
                    seed_offset: int = 0, repeat: np.ndarray | None = None) -> tuple[Evaluator, dict]:
    """Train on a dataset (or fine-tune ``model``); returns the model and a report with
    held-out ranking metrics."""
    torch.manual_seed(cfg.seed + seed_offset)
    rng = np.random.default_rng(cfg.seed + seed_offset)
    n = len(dec)
    perm = np.random.default_rng(cfg.seed).permutation(n)
    n_hold = int(round(n * cfg.holdout)) if n >= 20 else 0
    hold, train = perm[:n_hold], perm[n_hold:]
    if repeat is not None:  # oversampling (e.g. refinement samples near the frontier)
        train = np.repeat(train, np.asarray(repeat)[train])
    model = model if model is not None else Evaluator(space, grid, cfg, embed_dim)
    n_epochs = cfg.epochs if epochs is None else epochs
    for p in model.parameters():
        p.requires_grad_(True)
    x_all = model.features(dec, lat)
    lat_t = torch.as_tensor(lat, dtype=torch.float32)
    acc_t = torch.as_tensor(acc, dtype=torch.float32)
    grid_t = torch.tensor(grid.values, dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    bs = min(cfg.batch_size, len(train))
    steps_per_epoch = max(1, len(train) // bs)
    total = n_epochs * steps_per_epoch
    if total >= 4:  # warm-up of >= 2 steps (OneCycleLR divides by zero on a 1-step warm-up)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=total,
                                                    pct_start=max(0.1, 2.0 / total))
    else:  # a few steps only (tiny fine-tunes): constant learning rate
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    t0, step, loss_v = time.perf_counter(), 0, math.nan
    model.train()
    for epoch in range(n_epochs):
        order = train[rng.permutation(len(train))]
        for b in range(steps_per_epoch):
            idx = torch.from_numpy(order[b * bs:(b + 1) * bs])
            extra = torch.from_numpy(grid.stratified(cfg.random_budgets, rng)).float() if cfg.random_budgets else None
            budgets = grid_t if extra is None else torch.cat([grid_t, extra])
            if model.aux is not None:
                s, aux = model.score_grid(x_all[idx], budgets, with_aux=True)
                reg = (aux - acc_t[idx] * 100).pow(2).mean()
            else:
                s, reg = model.score_grid(x_all[idx], budgets), 0.0
            loss = ranking_loss(s, dominance(acc_t[idx], lat_t[idx], budgets)) + cfg.aux_regression * reg
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            loss_v = float(loss.detach())
        if progress:
            progress(epoch + 1, n_epochs, loss_v)
    model.eval()
    report: dict[str, Any] = {"train_size": int(len(train)), "holdout_size": int(n_hold), "steps": step,
                              "final_loss": loss_v, "seconds": time.perf_counter() - t0}
    if n_hold >= 10:
        with torch.no_grad():
            s = model.score_grid(x_all[torch.from_numpy(hold)], grid_t).numpy()
        report["holdout"] = ranking_metrics(s, acc[hold], lat[hold], np.asarray(grid.values))
    return model, report


def ranking_metrics(scores: np.ndarray, acc: np.ndarray, lat: np.ndarray, budgets: np.ndarray) -> dict[str, Any]:
    """Per budget: pairwise ranking accuracy against d(.,.,B) and Kendall tau of R against the
    true order (feasible archs by accuracy, above infeasible ones by latency); also tau among
    the feasible archs only."""
    from scipy.stats import kendalltau

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
        tau = float(kendalltau(s, util).statistic)
        tau_fit = float(kendalltau(s[fit], acc[fit]).statistic) if fit.sum() >= 3 else math.nan
        per.append({"budget_ms": float(B), "pairwise_accuracy": pair_acc, "kendall_tau": tau,
                    "kendall_tau_feasible": tau_fit, "n_feasible": int(fit.sum())})
    return {"per_budget": per,
            "mean_pairwise_accuracy": float(np.nanmean([p["pairwise_accuracy"] for p in per])),
            "mean_kendall_tau": float(np.nanmean([p["kendall_tau"] for p in per])),
            "mean_kendall_tau_feasible": float(np.nanmean([p["kendall_tau_feasible"] for p in per]))}


def train_evaluator(*args, **kwargs):
    """See :func:`_train_evaluator`; runs with :func:`nagkit.nag.config.torch_threads`."""
    with torch_threads():
        return _train_evaluator(*args, **kwargs)
