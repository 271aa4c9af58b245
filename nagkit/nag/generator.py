"""The budget-conditioned generator f(B; theta) and its REINFORCE trainer.

An LSTM reads the budget embedding g(B) (its initial state is a function of g(B), and g(B)
is part of its input, with the previous decision's token, at every step)
and emits the architecture decisions one by one (:func:`nagkit.nag.decisions.step_layout`):
resolution when the space has several, then per stage its depth followed by each slot's
kernel and expand ratio. Decisions of slots beyond a stage's depth are sampled but masked
out of log-probabilities and entropy (they do not change the arch).

Training maximises ``J = E_B E_alpha[R(alpha|B; w)] + lambda * H(pi(.|B))`` (paper eq. 4-5)
with REINFORCE: each step draws K budgets (one per slice of the range) x N archs, the reward
is the frozen evaluator's score, the baseline a moving average per budget slice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from nagkit.nag.budgets import BudgetGrid, make_embedding
from nagkit.nag.config import torch_threads, GeneratorConfig
from nagkit.nag.decisions import Decisions, n_choices, step_layout
from nagkit.space.space import SearchSpace


class Generator(nn.Module):
    def __init__(self, space: SearchSpace, grid: BudgetGrid, cfg: GeneratorConfig, embed_dim: int = 32):
        super().__init__()
        self.space, self.grid, self.cfg = space, grid, cfg
        self.layout = step_layout(space)
        self.sizes = [n_choices(space, kind) for kind, _, _ in self.layout]
        self.cmax = max(self.sizes)
        t = len(self.layout)
        self.embed = make_embedding(grid, embed_dim)
        self.tokens = nn.Embedding(t * self.cmax + 1, cfg.token_dim)
        self.cell = nn.LSTMCell(embed_dim + cfg.token_dim, cfg.hidden)
        self.init_state = nn.Linear(embed_dim, 2 * cfg.hidden)  # (h0, c0) from g(B)
        self.head_w = nn.Parameter(torch.randn(t, cfg.hidden, self.cmax) * 0.01)
        self.head_b = nn.Parameter(torch.zeros(t, self.cmax))
        mask = torch.full((t, self.cmax), float("-inf"))
        for i, c in enumerate(self.sizes):
            mask[i, :c] = 0.0
        self.register_buffer("logit_mask", mask)

    def forward(self, budgets: torch.Tensor, generator: torch.Generator | None = None,
                greedy: bool = False, temperature: float = 1.0,
                stats: bool = True) -> tuple[Decisions, torch.Tensor, torch.Tensor]:
        """Sample one arch per budget. Returns decisions, log pi(alpha|B) [n], entropy [n]
        (both zero when ``stats`` is off, for fast inference).

        The LSTM cell is unrolled by hand with the same gates as ``self.cell``: the g(B) and
        token halves of the input projection are computed once, not at every step."""
        sp = self.space
        n, md = budgets.shape[0], sp.max_depth
        g = self.embed(budgets)
        h, c = torch.tanh(self.init_state(g)).chunk(2, dim=1)
        cell, e_dim = self.cell, g.shape[1]
        g_proj = g @ cell.weight_ih[:, :e_dim].T + cell.bias_ih + cell.bias_hh  # [n, 4H]
        tok_proj = self.tokens.weight @ cell.weight_ih[:, e_dim:].T  # [V, 4H]
        w_hh = cell.weight_hh.T
        prev = torch.full((n,), len(self.layout) * self.cmax, dtype=torch.long)
        r = torch.zeros(n, dtype=torch.long)
        depth = torch.zeros(n, sp.n_stages, dtype=torch.long)
        k = torch.zeros(n, sp.n_block_slots, dtype=torch.long)
        e = torch.zeros(n, sp.n_block_slots, dtype=torch.long)
        logp = torch.zeros(n)
        ent = torch.zeros(n)
        depth_vals = torch.tensor(sp.depth_list)
        hid = h.shape[1]
        for t, (kind, s, j) in enumerate(self.layout):
            gates = g_proj + tok_proj[prev] + h @ w_hh
            if stats:
                i_g, f_g, c_g, o_g = gates.chunk(4, dim=1)
                c = torch.sigmoid(f_g) * c + torch.sigmoid(i_g) * torch.tanh(c_g)
                h = torch.sigmoid(o_g) * torch.tanh(c)
            else:  # inference: one sigmoid over all gates (fewer kernel calls)
                sg = torch.sigmoid(gates)
                c = sg[:, hid:2 * hid] * c + sg[:, :hid] * torch.tanh(gates[:, 2 * hid:3 * hid])
                h = sg[:, 3 * hid:] * torch.tanh(c)
            logits = h @ self.head_w[t] + self.head_b[t]
            if temperature != 1.0:
                logits = logits / temperature
            logits = logits + self.logit_mask[t]
            logq = torch.log_softmax(logits, dim=-1)
            if greedy:
                a = logq.argmax(dim=-1)
            else:
                # inverse-CDF sampling (same law as torch.multinomial, several times faster)
                u = torch.rand(n, 1, generator=generator)
                a = (torch.cumsum(logq.exp(), dim=-1) < u).sum(dim=-1).clamp_(max=self.sizes[t] - 1)
            live = None
            if kind in ("k", "e"):
                if stats:
                    live = (depth_vals[depth[:, s]] > j).float()
                (k if kind == "k" else e)[:, s * md + j] = a
            elif kind == "depth":
                depth[:, s] = a
            else:
                r = a
            if stats:
                q = logq.exp()
                step_ent = -(q * torch.where(torch.isfinite(logq), logq, torch.zeros_like(logq))).sum(-1)
                step_logp = logq.gather(1, a.unsqueeze(1)).squeeze(1)
                if live is not None:
                    step_logp, step_ent = step_logp * live, step_ent * live
                logp = logp + step_logp
                ent = ent + step_ent
            prev = t * self.cmax + a
        dec = Decisions(r.numpy(), depth.numpy(), k.numpy(), e.numpy())
        return dec, logp, ent

    def config_dict(self) -> dict[str, Any]:
        return {"generator": asdict(self.cfg), "grid": self.grid.to_dict(),
                "embed_dim": self.embed.table.shape[1], "space": self.space.to_dict()}


RewardFn = Callable[[Decisions, np.ndarray], torch.Tensor]


def _train_generator(space: SearchSpace, grid: BudgetGrid, cfg: GeneratorConfig, reward_fn: RewardFn,
                    embed_dim: int = 32, progress: Callable[[int, int, float], None] | None = None,
                    log_every: int = 25, gen: Generator | None = None, steps: int | None = None,
                    seed_offset: int = 0) -> tuple[Generator, dict]:
    """REINFORCE with entropy regularisation and a moving-average baseline per budget slice.

    ``reward_fn(decisions, budgets_ms) -> tensor [n]`` (no gradient) is normally the frozen
    evaluator's R(alpha|B). Returns the generator and a report with the reward history."""
    torch.manual_seed(cfg.seed + seed_offset)
    rng = np.random.default_rng(cfg.seed + seed_offset)
    tgen = torch.Generator().manual_seed(cfg.seed + seed_offset)
    gen = gen if gen is not None else Generator(space, grid, cfg, embed_dim)
    n_steps = cfg.steps if steps is None else steps
    opt = torch.optim.Adam(gen.parameters(), lr=cfg.lr)
    kb, nb = cfg.budgets_per_step, cfg.samples_per_budget
    baseline = np.full(kb, np.nan)
    history: list[dict[str, float]] = []
    t0 = time.perf_counter()
    gen.train()
    for step in range(n_steps):
        b = grid.stratified(kb, rng)
        bud = np.repeat(b, nb)
        dec, logp, ent = gen(torch.from_numpy(bud).float(), generator=tgen)
        with torch.no_grad():
            rew = reward_fn(dec, bud).reshape(kb, nb)
        means = rew.mean(dim=1).numpy()
        baseline = np.where(np.isnan(baseline), means, cfg.baseline_decay * baseline + (1 - cfg.baseline_decay) * means)
        adv = rew - torch.from_numpy(baseline).float().unsqueeze(1)
        adv = adv / (rew.std(dim=1, keepdim=True) + 1e-6)
        loss = -(adv.reshape(-1) * logp).mean() - cfg.entropy * ent.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(gen.parameters(), 5.0)
        opt.step()
        if step % log_every == 0 or step == n_steps - 1:
            history.append({"step": step, "reward": float(rew.mean()), "entropy": float(ent.detach().mean())})
        if progress:
            progress(step + 1, n_steps, float(rew.mean()))
    gen.eval()
    return gen, {"steps": n_steps, "seconds": time.perf_counter() - t0, "history": history}


def sample_archs(gen: Generator, budgets_ms: np.ndarray, n: int, seed: int,
                 temperature: float = 1.0) -> tuple[Decisions, np.ndarray]:
    """``n`` samples per budget (one batch); returns decisions and the budget of each row."""
    bud = np.repeat(np.asarray(budgets_ms, dtype=np.float64), n)
    tgen = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        dec, _, _ = gen(torch.from_numpy(bud).float(), generator=tgen, temperature=temperature, stats=False)
    return dec, bud


def train_generator(*args, **kwargs):
    """See :func:`_train_generator`; runs with :func:`nagkit.nag.config.torch_threads`."""
    with torch_threads():
        return _train_generator(*args, **kwargs)
