"""Generation's decode in NumPy: :meth:`Generator.forward` for sampling, without torch's per-call cost.

Zero-query generation decodes 51 archs, one LSTM step per decision (26 steps on an OFA space),
each step some twenty operations on arrays of 51 x 256 floats. At that size torch spends more
time dispatching an operation than computing it (about 5 us a call against 1-2 us for NumPy),
so the same arithmetic in NumPy is faster: a whole generation about 1.2-1.4x on the 2-core
reference CPU (benchmarks/nag/bench_decode.py). This path serves sampling only
(:func:`nagkit.nag.generator.sample_archs` without further limits): training, teacher forcing,
log-probabilities and the limits' masks stay in :meth:`Generator.forward`.

It computes what ``forward`` computes, in the same precisions (the LSTM in float32, the latency
bounds in float64) and with the same random numbers (one ``torch.rand`` draw per step from the
caller's generator); only the last bits of a float32 sum can differ, so a choice can differ only
where a draw falls within rounding of a boundary (tests/nag/test_fast_decode.py compares them).
"""

from __future__ import annotations

import numpy as np
import torch


class _Bounds:
    """A table's latency bounds (``Generator._bounds``) as NumPy arrays: one copy per bind."""

    def __init__(self, gen) -> None:
        bd = gen._bounds
        self.source = bd  # held, and compared by identity: a new bind makes new bounds
        n = lambda t: t.numpy().copy()  # noqa: E731
        self.r_min, self.r_max = n(bd.r_min), n(bd.r_max)
        self.depth_min, self.depth_max = n(bd.depth_min), n(bd.depth_max)
        self.dmin_lo, self.dmax_hi = n(bd.dmin_lo), n(bd.dmax_hi)
        self.slot_min, self.slot_max, self.blocks = n(bd.slot_min), n(bd.slot_max), n(bd.blocks)
        self.live = gen._live.numpy().copy()
        self.dead = gen._dead.numpy().copy()


def _bounds(gen) -> _Bounds:
    got = getattr(gen, "_np_bounds", None)
    if got is None or got.source is not gen._bounds:
        got = gen._np_bounds = _Bounds(gen)
    return got


def _matmul(x: np.ndarray, w: torch.Tensor) -> np.ndarray:
    """``x @ w`` by torch (its one intra-op thread under :func:`~nagkit.nag.config.torch_threads`):
    NumPy's BLAS would start its own threads for these sizes, several times slower on a busy
    2-core machine; torch's product is also the one ``forward`` computes."""
    return (torch.from_numpy(np.ascontiguousarray(x)) @ w).numpy()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out = np.negative(x)
    np.exp(out, out=out)
    out += 1.0
    return np.reciprocal(out, out=out)


def _options(A: _Bounds, kind: str, s: int, j: int, md: int, lo, hi, ri, depth, every_depth: bool):
    """``Generator._options`` in NumPy: the fastest and slowest completion of each choice [n, size]
    and the live rows (None where every row is live: not a block slot, or one that
    ``every_depth`` of the stage has)."""
    n = len(lo)
    if kind == "r":
        return np.broadcast_to(A.r_min, (n, len(A.r_min))), np.broadcast_to(A.r_max, (n, len(A.r_max))), None
    if kind == "depth":
        return ((lo - A.dmin_lo[ri, s])[:, None] + A.depth_min[ri, s],
                (hi - A.dmax_hi[ri, s])[:, None] + A.depth_max[ri, s], None)
    slot = s * md + j
    blocks = A.blocks[ri, slot]
    opt_lo = (lo - A.slot_min[ri, slot])[:, None] + blocks
    opt_hi = (hi - A.slot_max[ri, slot])[:, None] + blocks
    if every_depth:
        return opt_lo, opt_hi, None
    live = A.live[depth[:, s], j]
    return np.where(live[:, None], opt_lo, lo[:, None]), np.where(live[:, None], opt_hi, hi[:, None]), live


def sample(gen, budgets: np.ndarray, generator: torch.Generator, greedy_rows: np.ndarray | None,
           temperature: float = 1.0):
    """One arch per budget (rows where ``greedy_rows`` take the most likely choice): the decisions
    of ``gen(budgets, generator=..., greedy=..., stats=False)``. Returns (r, depth, k, e) arrays."""
    if gen._bounds is None:
        raise RuntimeError("Generator.bind(SlotLatency) must be called before decoding")
    A, sp, md = _bounds(gen), gen.space, gen.space.max_depth
    b = np.asarray(budgets, dtype=np.float64)
    n = len(b)
    with torch.no_grad():  # the weights' products as forward computes them, read afresh every call
        g = gen.embed(torch.from_numpy(b).to(torch.float32))
        h, c = (x.numpy() for x in torch.tanh(gen.init_state(g)).chunk(2, dim=1))
        cell, e_dim, tdim = gen.cell, g.shape[1], gen.cfg.token_dim
        w_ih = cell.weight_ih
        g_proj = (g @ w_ih[:, :e_dim].T + cell.bias_ih + cell.bias_hh).numpy()
        tok_proj = (gen.tokens.weight @ w_ih[:, e_dim:e_dim + tdim].T).numpy()
        w_rec = torch.cat([w_ih[:, e_dim + tdim:].T, cell.weight_hh.T])
        head_w, head_b = gen.head_w.detach(), gen.head_b.detach().numpy()
    hid = h.shape[1]
    inv_b = 1.0 / b
    b_tol = (b + 1e-9)[:, None]
    rows = np.arange(n)
    prev = np.full(n, len(gen.layout) * gen.cmax)
    ri = np.zeros(n, dtype=np.int64)
    depth = np.zeros((n, sp.n_stages), dtype=np.int64)
    blk = np.zeros((n, sp.n_block_slots), dtype=np.int64)
    if len(sp.resolutions) == 1:
        lo, hi = np.full(n, A.r_min[0]), np.full(n, A.r_max[0])
    else:
        lo, hi = np.full(n, A.r_min.min()), np.full(n, A.r_max.max())
    x = np.empty((n, 2 + hid), dtype=np.float32)
    for t, (kind, s, j) in enumerate(gen.layout):
        left = b - lo
        x[:, 0] = np.clip(left * inv_b, -1, 1)
        x[:, 1] = np.clip(left / np.maximum(hi - lo, 1e-9), 0, 2)
        x[:, 2:] = h
        gates = g_proj + tok_proj[prev]
        gates += _matmul(x, w_rec)
        ifo = _sigmoid(gates[:, :2 * hid]), _sigmoid(gates[:, 3 * hid:])  # input, forget; output
        c = ifo[0][:, hid:] * c + ifo[0][:, :hid] * np.tanh(gates[:, 2 * hid:3 * hid])
        h = ifo[1] * np.tanh(c)
        size = gen.sizes[t]
        opt_lo, opt_hi, live = _options(A, kind, s, j, md, lo, hi, ri, depth, every_depth=j < gen._min_depth)
        bad = opt_lo > b_tol
        if live is not None:
            bad = np.where(live[:, None], bad, A.dead)
        logits = _matmul(h, head_w[t, :, :size]) + head_b[t, :size]
        if temperature != 1.0:
            logits = logits / np.float32(temperature)
        logits = np.where(bad, -np.inf, logits)
        top = logits.max(axis=1, keepdims=True)
        shifted = logits - top
        logq = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        a = logq.argmax(axis=1)
        u = torch.rand(n, 1, generator=generator).numpy()  # drawn at every step, as forward draws
        last_ok = size - 1 - (~bad)[:, ::-1].argmax(axis=1)
        drawn = np.minimum((np.cumsum(np.exp(logq), axis=1) < u).sum(axis=1), last_ok)
        a = drawn if greedy_rows is None else np.where(greedy_rows, a, drawn)
        lo, hi = opt_lo[rows, a], opt_hi[rows, a]
        if kind == "block":
            blk[:, s * md + j] = a
        elif kind == "depth":
            depth[:, s] = a
        else:
            ri = a
        prev = t * gen.cmax + a
    return ri, depth, blk // gen.ne, blk % gen.ne
