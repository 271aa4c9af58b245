"""The budget-conditioned generator f(B; theta): an LSTM policy with constrained decoding.

An LSTM reads the budget embedding g(B) (its initial state is a function of g(B), and g(B) is
part of its input at every step, with the previous decision's token) and emits the
architecture decisions one by one (:func:`nagkit.space.decisions.step_layout`): the resolution
when the space has several, then per stage its depth followed by each slot's kernel and
expand ratio.

**Constrained decoding.** With a per-block table an arch's latency is ``fixed(r)`` plus the
sum of its active slots (:class:`nagkit.latency.slots.SlotLatency`), so after any prefix of
decisions the fastest and the slowest completion are known exactly. Each step masks the
choices whose fastest completion would exceed B: every sample fits its budget by construction,
and the policy spends its probability only on feasible archs. The step also sees how much of
the budget is left: ``(B - fastest) / B`` and ``(B - fastest) / (slowest - fastest)`` of the
completion, which tells it to use the budget. Limits beside the budget (parameters, file size,
MACs, peak activation memory) add masks of the same kind at sampling time, the policy unchanged
(:mod:`nagkit.nag.constraints`). Slots beyond a stage's depth are not decided
(index 0, no log-probability, no entropy).

Training (:mod:`nagkit.nag.train`): imitation of the frontier archive (teacher forcing,
:meth:`Generator.log_prob`), then REINFORCE on the evaluator's reward (paper eq. 4-5)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from nagkit.latency.slots import SlotLatency
from nagkit.nag import fast_decode
from nagkit.nag.budgets import BudgetGrid, make_embedding
from nagkit.nag.config import GeneratorConfig, torch_threads
from nagkit.nag.optim import Adam, one_cycle
from nagkit.space.decisions import Decisions
from nagkit.space.space import SearchSpace

N_SLACK = 2  # budget-left features per step


def decode_layout(space: SearchSpace) -> list[tuple[str, int, int]]:
    """The generator's steps as (kind, stage, slot): the resolution (when the space has
    several), then per stage its depth and each slot's block, kernel and expand ratio chosen
    together as one token (as OFA's mutation resamples them together)."""
    steps: list[tuple[str, int, int]] = [("r", -1, -1)] if len(space.resolutions) > 1 else []
    for s in range(space.n_stages):
        steps.append(("depth", s, -1))
        steps += [("block", s, j) for j in range(space.max_depth)]
    return steps


class _Bounds:
    """The latency arrays of constrained decoding as float64 tensors (one copy per table)."""

    def __init__(self, lat: SlotLatency):
        t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64)  # noqa: E731
        self.r_min, self.r_max = t(lat.r_min), t(lat.r_max)
        self.depth_min, self.depth_max = t(lat.depth_min), t(lat.depth_max)  # [R, S, nd]
        self.dmin_lo = self.depth_min.min(dim=2).values  # [R, S]
        self.dmax_hi = self.depth_max.max(dim=2).values
        self.slot_min, self.slot_max = t(lat.slot_min), t(lat.slot_max)  # [R, slots]
        self.blocks = t(lat.slots.reshape(lat.slots.shape[0], lat.slots.shape[1], -1))  # [R, slots, nk*ne]


class Generator(nn.Module):
    def __init__(self, space: SearchSpace, grid: BudgetGrid, cfg: GeneratorConfig, embed_dim: int = 32):
        super().__init__()
        self.space, self.grid, self.cfg = space, grid, cfg
        self.layout = decode_layout(space)
        self.ne = len(space.expand_list)
        nb = len(space.ks_list) * self.ne
        self.sizes = [{"r": len(space.resolutions), "depth": len(space.depth_list), "block": nb}[kind]
                      for kind, _, _ in self.layout]
        self.cmax = max(self.sizes)
        t = len(self.layout)
        self.embed = make_embedding(grid, embed_dim)
        self.tokens = nn.Embedding(t * self.cmax + 1, cfg.token_dim)
        self.cell = nn.LSTMCell(embed_dim + cfg.token_dim + N_SLACK, cfg.hidden)
        self.init_state = nn.Linear(embed_dim, 2 * cfg.hidden)  # (h0, c0) from g(B)
        self.head_w = nn.Parameter(torch.randn(t, cfg.hidden, self.cmax) * 0.01)
        self.head_b = nn.Parameter(torch.zeros(t, self.cmax))
        md = space.max_depth
        self._live = torch.as_tensor(np.arange(md)[None, :] < np.asarray(space.depth_list)[:, None])  # [nd, md]
        self._min_depth = min(space.depth_list)
        self._dead = torch.arange(nb) > 0  # an undecided slot may only take token 0
        self._bounds: _Bounds | None = None
        self._lat: SlotLatency | None = None

    def bind(self, latency: SlotLatency) -> Generator:
        """Use ``latency``'s table for constrained decoding (required before decoding)."""
        self._lat, self._bounds = latency, _Bounds(latency)
        return self

    # -- decoding ------------------------------------------------------------------------------
    def forward(self, budgets: torch.Tensor, actions: Decisions | None = None,
                generator: torch.Generator | None = None, greedy: torch.Tensor | bool = False,
                temperature: float = 1.0, stats: bool = True, limits=None) -> tuple[Decisions, torch.Tensor, torch.Tensor]:
        """Sample one arch per budget (rows where ``greedy`` is true take the most likely choice),
        or score the given ``actions`` (teacher forcing). Returns decisions, log pi(alpha|B) [n]
        and entropy [n] (zeros unless ``stats`` or ``actions``). ``limits``: the masks of further
        limits (:class:`nagkit.nag.constraints.MaskArrays`): a choice is also masked unless one of
        their floor completions meets the budget and every limit (decisions 39)."""
        if self._bounds is None:
            raise RuntimeError("Generator.bind(SlotLatency) must be called before decoding")
        bd, sp, md = self._bounds, self.space, self.space.max_depth
        n = budgets.shape[0]
        b = budgets.to(torch.float64)
        inv_b = 1.0 / b
        g = self.embed(budgets.to(torch.float32))
        h, c = torch.tanh(self.init_state(g)).chunk(2, dim=1)
        cell, e_dim, tdim, hid = self.cell, g.shape[1], self.cfg.token_dim, h.shape[1]
        w_ih = cell.weight_ih
        g_proj = g @ w_ih[:, :e_dim].T + cell.bias_ih + cell.bias_hh  # [n, 4H]
        tok_proj = self.tokens.weight @ w_ih[:, e_dim:e_dim + tdim].T  # [V, 4H]
        w_rec = torch.cat([w_ih[:, e_dim + tdim:].T, cell.weight_hh.T])  # [N_SLACK + H, 4H]
        want = self._actions(actions) if actions is not None else None
        greedy_rows = torch.as_tensor(greedy).expand(n) if not isinstance(greedy, bool) else None
        track = stats or actions is not None
        prev = torch.full((n,), len(self.layout) * self.cmax, dtype=torch.long)
        ri = torch.zeros(n, dtype=torch.long)
        depth = torch.zeros(n, sp.n_stages, dtype=torch.long)
        blk = torch.zeros(n, sp.n_block_slots, dtype=torch.long)
        if limits is not None and limits.latency is not None:  # a peak limit: bounds among allowed choices
            bd = _Bounds(limits.latency)
        lo, hi = self._start_bounds(n, bd)  # fastest and slowest completion so far
        ext = limits.start(n) if limits is not None else None  # [n, F, C]: each floor's completion, per limit
        logp, ent = torch.zeros(n), torch.zeros(n)
        b_tol = (b + 1e-9)[:, None]
        rows = torch.arange(n)
        for t, (kind, s, j) in enumerate(self.layout):
            left = b - lo
            slack = torch.stack([(left * inv_b).clamp(-1, 1), (left / (hi - lo).clamp_min(1e-9)).clamp(0, 2)], 1)
            gates = g_proj + tok_proj[prev] + torch.cat([slack.float(), h], 1) @ w_rec
            sg = torch.sigmoid(gates)
            c = sg[:, hid:2 * hid] * c + sg[:, :hid] * torch.tanh(gates[:, 2 * hid:3 * hid])
            h = sg[:, 3 * hid:] * torch.tanh(c)
            size = self.sizes[t]
            opt_lo, opt_hi, live = self._options(kind, s, j, lo, hi, ri, depth, n, bd)
            bad = opt_lo > b_tol
            if ext is not None:
                ext_opt = limits.options(kind, s, j, ext, ri, live)  # [n, size, F, C]
                bad = bad | ~limits.allowed(ext_opt, b)
            if live is not None:
                bad = torch.where(live[:, None], bad, self._dead)
            logits = h @ self.head_w[t, :, :size] + self.head_b[t, :size]
            if temperature != 1.0:
                logits = logits / temperature
            logq = torch.log_softmax(logits.masked_fill(bad, float("-inf")), dim=-1)
            a = want[:, t] if want is not None else _choose(logq, bad, greedy, greedy_rows, generator)
            lo, hi = opt_lo[rows, a], opt_hi[rows, a]
            if ext is not None:
                ext = ext_opt[rows, a]
            if kind == "block":
                blk[:, s * md + j] = a
            elif kind == "depth":
                depth[:, s] = a
            else:
                ri = a
            if track:
                step_logp = logq[rows, a]
                if live is not None:
                    step_logp = torch.where(live, step_logp, torch.zeros_like(step_logp))
                logp = logp + step_logp
                if stats:
                    q = logq.exp()
                    step_ent = -(q * torch.where(bad, torch.zeros_like(logq), logq)).sum(-1)
                    ent = ent + (step_ent if live is None else torch.where(live, step_ent, torch.zeros_like(step_ent)))
            prev = t * self.cmax + a
        k, e = (blk // self.ne).numpy(), (blk % self.ne).numpy()
        return Decisions(ri.numpy(), depth.numpy(), k, e), logp, ent

    def _actions(self, dec: Decisions) -> torch.Tensor:
        """[n, steps] tokens of given decisions (block = k * n_expand + e; 0 where inactive)."""
        md = self.space.max_depth
        act = dec.active(self.space)
        cols = []
        for kind, s, j in self.layout:
            if kind == "r":
                cols.append(dec.r)
            elif kind == "depth":
                cols.append(dec.depth[:, s])
            else:
                slot = s * md + j
                cols.append(np.where(act[:, slot], dec.k[:, slot] * self.ne + dec.e[:, slot], 0))
        return torch.as_tensor(np.stack(cols, axis=1), dtype=torch.long)

    def log_prob(self, budgets: torch.Tensor, dec: Decisions) -> torch.Tensor:
        """log pi(dec | B) [n] under constrained decoding (each arch must fit its budget).

        Teacher forcing knows every step's input before the LSTM runs: the previous token is the
        target's, and the budget left and the masks follow from the target's prefix alone. So the
        bounds are walked once without gradients, then the LSTM runs over the whole sequence in
        one fused call (``torch.lstm``, the LSTMCell's own weights) and every step's masked
        log-softmax is taken at once: the same value as decoding step by step (tested), about
        ten times faster to train on (docs/decisions.md 37)."""
        if self._bounds is None:
            raise RuntimeError("Generator.bind(SlotLatency) must be called before decoding")
        want = self._actions(dec)
        slack, bad, live = self._teacher_masks(budgets, want)
        n, t_steps = want.shape
        g = self.embed(budgets.to(torch.float32))
        h0, c0 = torch.tanh(self.init_state(g)).chunk(2, dim=1)
        prev = torch.cat([torch.full((n, 1), t_steps * self.cmax, dtype=torch.long),
                          torch.arange(t_steps - 1)[None, :] * self.cmax + want[:, :-1]], dim=1)
        x = torch.cat([g.unsqueeze(1).expand(n, t_steps, g.shape[1]), self.tokens(prev), slack], dim=2)
        cell = self.cell
        out = torch.lstm(x, (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()),
                         [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh], True, 1, 0.0,
                         self.training, False, True)[0]
        logits = torch.einsum("nth,thc->ntc", out, self.head_w) + self.head_b
        logq = torch.log_softmax(logits.masked_fill(bad, float("-inf")), dim=-1)
        step = logq.gather(2, want.unsqueeze(2)).squeeze(2)
        return torch.where(live, step, torch.zeros_like(step)).sum(dim=1)

    @torch.no_grad()
    def _teacher_masks(self, budgets: torch.Tensor, want: torch.Tensor):
        """For given actions: per step the budget-left features [n, T, 2] (float32), the masked
        choices [n, T, cmax] (the step's invalid choices and the padding beyond its size) and
        whether the step is decided [n, T]: what :meth:`forward` computes along the way."""
        bd, sp, md = self._bounds, self.space, self.space.max_depth
        n, t_steps = want.shape
        b = budgets.to(torch.float64)
        inv_b = 1.0 / b
        ri = torch.zeros(n, dtype=torch.long)
        depth = torch.zeros(n, sp.n_stages, dtype=torch.long)
        lo, hi = self._start_bounds(n, bd)
        slack = torch.zeros(n, t_steps, 2)
        bad = torch.ones(n, t_steps, self.cmax, dtype=torch.bool)
        live_all = torch.ones(n, t_steps, dtype=torch.bool)
        for t, (kind, s, j) in enumerate(self.layout):
            left = b - lo
            slack[:, t, 0] = (left * inv_b).clamp(-1, 1).float()
            slack[:, t, 1] = (left / (hi - lo).clamp_min(1e-9)).clamp(0, 2).float()
            opt_lo, opt_hi, live = self._options(kind, s, j, lo, hi, ri, depth, n, bd)
            step_bad = opt_lo > (b + 1e-9)[:, None]
            if live is not None:
                step_bad = torch.where(live[:, None], step_bad, self._dead)
                live_all[:, t] = live
            bad[:, t, :self.sizes[t]] = step_bad
            a = want[:, t]
            ix = a[:, None]
            lo, hi = opt_lo.gather(1, ix).squeeze(1), opt_hi.gather(1, ix).squeeze(1)
            if kind == "depth":
                depth[:, s] = a
            elif kind == "r":
                ri = a
        return slack, bad, live_all

    def _start_bounds(self, n: int, bd: _Bounds) -> tuple[torch.Tensor, torch.Tensor]:
        """The fastest and slowest completion before any decision."""
        if len(self.space.resolutions) == 1:
            return bd.r_min[0].expand(n).clone(), bd.r_max[0].expand(n).clone()
        return bd.r_min.min().expand(n).clone(), bd.r_max.max().expand(n).clone()

    def _options(self, kind: str, s: int, j: int, lo, hi, ri, depth, n: int, bd: _Bounds):
        """(fastest, slowest completion of each choice of this step [n, size], live rows or None:
        None also for a block slot that every depth has)."""
        md = self.space.max_depth
        if kind == "r":
            return bd.r_min.expand(n, -1), bd.r_max.expand(n, -1), None
        if kind == "depth":
            return ((lo - bd.dmin_lo[ri, s])[:, None] + bd.depth_min[ri, s],
                    (hi - bd.dmax_hi[ri, s])[:, None] + bd.depth_max[ri, s], None)
        slot = s * md + j
        blocks = bd.blocks[ri, slot]  # [n, nb]
        if j < self._min_depth:  # a slot every depth has: live in every row
            return (lo - bd.slot_min[ri, slot])[:, None] + blocks, (hi - bd.slot_max[ri, slot])[:, None] + blocks, None
        live = self._live[depth[:, s], j]
        return (torch.where(live[:, None], (lo - bd.slot_min[ri, slot])[:, None] + blocks, lo[:, None]),
                torch.where(live[:, None], (hi - bd.slot_max[ri, slot])[:, None] + blocks, hi[:, None]), live)

    def config_dict(self) -> dict[str, Any]:
        return {"generator": asdict(self.cfg), "grid": self.grid.to_dict(),
                "embed_dim": self.embed.table.shape[1], "space": self.space.to_dict()}


def _choose(logq: torch.Tensor, bad: torch.Tensor, greedy, greedy_rows: torch.Tensor | None,
            generator: torch.Generator | None) -> torch.Tensor:
    """The step's choice per row: the most likely one (``greedy`` true, or where
    ``greedy_rows``), else a draw by inverse-CDF sampling (the law of torch.multinomial, faster)."""
    a = logq.argmax(dim=-1)
    if greedy is True:
        return a
    u = torch.rand(logq.shape[0], 1, generator=generator)
    last_ok = (~bad).cumsum(-1).argmax(-1)  # the last allowed choice (argmax: the first of the maxima)
    # float rounding can take the cumulative sum past it
    drawn = torch.minimum((torch.cumsum(logq.exp(), dim=-1) < u).sum(dim=-1), last_ok)
    return drawn if greedy_rows is None else torch.where(greedy_rows, a, drawn)


RewardFn = Callable[[Decisions, np.ndarray], torch.Tensor]


def imitate(gen: Generator, budgets_fn: Callable[[int, np.random.Generator], tuple[np.ndarray, Decisions]],
            cfg: GeneratorConfig, seed: int, progress: Callable[[int, int, float], None] | None = None) -> dict:
    """Teacher forcing on (budget, target arch) pairs from ``budgets_fn(n, rng)``: maximise
    log pi(alpha | B) of the frontier archive's top archs within each budget."""
    with torch_threads():
        gen.train()
        rng = np.random.default_rng(seed)
        opt = Adam(gen.parameters(), lr=cfg.lr)
        steps = cfg.imitation_steps
        sched = one_cycle(steps, cfg.lr, max(0.1, 2.0 / steps)) if steps >= 4 else None
        t0, loss_v, history = time.perf_counter(), float("nan"), []
        for step in range(steps):
            bud, dec = budgets_fn(cfg.imitation_batch, rng)
            logp = gen.log_prob(torch.from_numpy(bud), dec)
            loss = -logp.mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(gen.parameters(), 5.0)
            if sched is not None:
                opt.lr, opt.beta1 = sched[step]
            opt.step()
            loss_v = float(loss.detach())
            if step % 100 == 0 or step == steps - 1:
                history.append({"step": step, "nll": loss_v})
            if progress:
                progress(step + 1, steps, loss_v)
        gen.eval()
        return {"steps": steps, "seconds": time.perf_counter() - t0, "final_nll": loss_v, "history": history}


def reinforce(gen: Generator, grid_range: tuple[float, float], cfg: GeneratorConfig, reward_fn: RewardFn,
              seed: int, progress: Callable[[int, int, float], None] | None = None) -> dict:
    """REINFORCE with entropy regularisation and a moving-average baseline per budget slice
    (paper eq. 4-5); ``reward_fn(decisions, budgets_ms) -> tensor [n]`` (no gradient)."""
    with torch_threads():
        rng = np.random.default_rng(seed)
        tgen = torch.Generator().manual_seed(seed)
        opt = Adam(gen.parameters(), lr=cfg.rl_lr)
        kb, nb = cfg.budgets_per_step, cfg.samples_per_budget
        lo, hi = grid_range
        baseline = np.full(kb, np.nan)
        history: list[dict[str, float]] = []
        t0 = time.perf_counter()
        gen.train()
        for step in range(cfg.steps):
            edges = np.linspace(lo, hi, kb + 1)
            b = edges[:-1] + rng.random(kb) * np.diff(edges)
            bud = np.repeat(b, nb)
            dec, logp, ent = gen(torch.from_numpy(bud), generator=tgen)
            with torch.no_grad():
                rew = reward_fn(dec, bud).reshape(kb, nb)
            means = rew.mean(dim=1).numpy()
            baseline = np.where(np.isnan(baseline), means,
                                cfg.baseline_decay * baseline + (1 - cfg.baseline_decay) * means)
            adv = (rew - torch.from_numpy(baseline).float().unsqueeze(1)) / (rew.std(dim=1, keepdim=True) + 1e-6)
            loss = -(adv.reshape(-1) * logp.float()).mean() - cfg.entropy * ent.float().mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(gen.parameters(), 5.0)
            opt.step()
            if step % 25 == 0 or step == cfg.steps - 1:
                history.append({"step": step, "reward": float(rew.mean()), "entropy": float(ent.detach().mean())})
            if progress:
                progress(step + 1, cfg.steps, float(rew.mean()))
        gen.eval()
        return {"steps": cfg.steps, "seconds": time.perf_counter() - t0, "history": history}


def sample_archs(gen: Generator, budgets_ms: np.ndarray, n: int, seed: int, temperature: float = 1.0,
                 greedy: bool = False, limits=None) -> tuple[Decisions, np.ndarray]:
    """``n`` samples per budget in one batch; with ``greedy`` the first row of each budget is the
    greedy decode (the most likely choice at every step); ``limits``: further limits' masks
    (:meth:`Generator.forward`). Returns decisions and each row's budget."""
    bud = np.repeat(np.asarray(budgets_ms, dtype=np.float64), n)
    rows = np.tile(np.arange(n) == 0, len(budgets_ms)) & greedy
    tgen = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        if limits is None:  # the same decode in NumPy, faster (nagkit.nag.fast_decode)
            return Decisions(*fast_decode.sample(gen, bud, tgen, rows if greedy else None, temperature)), bud
        dec, _, _ = gen(torch.from_numpy(bud), generator=tgen, temperature=temperature, stats=False,
                        greedy=torch.from_numpy(rows) if greedy else False, limits=limits)
    return dec, bud
