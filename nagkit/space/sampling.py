"""Seeded sampling and the one set of search operators, on decision arrays.

All randomness comes from an explicit ``numpy.random.Generator``. The operators work on
:class:`nagkit.space.decisions.Decisions` batches (one row per architecture) and on the full
OFA genome (every block slot, active or not), as OFA's do:

- :func:`random_decisions`: uniform rows (OFA's ``random_sample``);
- :func:`mutate`: OFA's ``mutate_sample``: the resolution, each block (kernel and expand
  together, one coin per block) and each stage's depth are resampled uniformly, each with
  probability ``prob``;
- :func:`crossover`: OFA's ``crossover_sample``: every gene (resolution, each depth, each
  slot's kernel, each slot's expand) from either parent;
- :func:`small_moves`: 1..n local changes (a kernel, an expand, a depth +-1, a resolution
  step), for accuracy-guided local search;
- :func:`repair_down`: latency-lowering steps for rows over their budget.

Arch-level helpers (:func:`sample`, :func:`sample_many`) draw single uniform archs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nagkit.space.arch import Arch
from nagkit.space.decisions import Decisions, active_of, arch_keys
from nagkit.space.space import SearchSpace


@dataclass(frozen=True)
class Genome:
    """OFA-style genome of one arch (values, not indices): kernel/expand for every slot,
    depth per stage, resolution."""

    ks: tuple[int, ...]
    e: tuple[int, ...]
    d: tuple[int, ...]
    r: int

    def to_arch(self, space: SearchSpace) -> Arch:
        md = space.max_depth
        stages = tuple(
            tuple((self.ks[s * md + i], self.e[s * md + i]) for i in range(self.d[s]))
            for s in range(space.n_stages)
        )
        return Arch(self.r, stages)


def _choice(rng: np.random.Generator, vals) -> int:
    return int(vals[int(rng.integers(len(vals)))])


def random_genome(space: SearchSpace, rng: np.random.Generator) -> Genome:
    n = space.n_block_slots
    return Genome(
        ks=tuple(_choice(rng, space.ks_list) for _ in range(n)),
        e=tuple(_choice(rng, space.expand_list) for _ in range(n)),
        d=tuple(_choice(rng, space.depth_list) for _ in range(space.n_stages)),
        r=_choice(rng, space.resolutions),
    )


def sample(space: SearchSpace, rng: np.random.Generator) -> Arch:
    """A uniformly random architecture (each choice independent, as in OFA)."""
    return random_genome(space, rng).to_arch(space)


def sample_many(space: SearchSpace, n: int, seed: int) -> list[Arch]:
    rng = np.random.default_rng(seed)
    return [sample(space, rng) for _ in range(n)]


# -- batch operators on decision rows --------------------------------------------------------
def random_decisions(space: SearchSpace, n: int, rng: np.random.Generator) -> Decisions:
    """``n`` uniform rows: every gene independently uniform (OFA's ``random_sample``)."""
    slots = space.n_block_slots
    return Decisions(rng.integers(len(space.resolutions), size=n),
                     rng.integers(len(space.depth_list), size=(n, space.n_stages)),
                     rng.integers(len(space.ks_list), size=(n, slots)),
                     rng.integers(len(space.expand_list), size=(n, slots)))


def mutate(space: SearchSpace, dec: Decisions, rng: np.random.Generator, prob: float = 0.1) -> Decisions:
    """OFA's ``mutate_sample`` on every row: with probability ``prob`` each, the resolution is
    resampled, each block slot (active or not) gets a new kernel *and* expand ratio (one coin
    per block, both drawn uniformly), and each stage's depth is resampled. A resampled gene may
    draw its old value, as in OFA."""
    n, slots = len(dec), space.n_block_slots
    out = dec.copy()
    m_r = rng.random(n) < prob
    out.r[m_r] = rng.integers(len(space.resolutions), size=int(m_r.sum()))
    m_b = rng.random((n, slots)) < prob
    nb = int(m_b.sum())
    out.k[m_b] = rng.integers(len(space.ks_list), size=nb)
    out.e[m_b] = rng.integers(len(space.expand_list), size=nb)
    m_d = rng.random((n, space.n_stages)) < prob
    out.depth[m_d] = rng.integers(len(space.depth_list), size=int(m_d.sum()))
    return out


def crossover(a: Decisions, b: Decisions, rng: np.random.Generator) -> Decisions:
    """OFA's ``crossover_sample`` row by row: every gene (resolution, each depth, each slot's
    kernel and, independently, its expand ratio) from either parent with probability 1/2."""

    def pick(x, y):
        return np.where(rng.random(x.shape) < 0.5, x, y)

    return Decisions(pick(a.r, b.r), pick(a.depth, b.depth), pick(a.k, b.k), pick(a.e, b.e))


def small_moves(space: SearchSpace, dec: Decisions, rng: np.random.Generator, *, max_changes: int = 2,
                res_step: int = 4) -> Decisions:
    """Mutants with 1..``max_changes`` small changes each (uniform count): a kernel or an
    expand of an active block changed to another value, a stage's depth +-1, or the resolution
    moved by 1..``res_step`` steps either way (exactly ``-res_step`` steps when negative)
    (kinds 35/35/15/15%). Every mutant differs from its parent or hits a bound."""
    out = dec.copy()
    n = len(out)
    nk, ne, nd, nr = len(space.ks_list), len(space.expand_list), len(space.depth_list), len(space.resolutions)
    n_changes = rng.integers(1, max(1, max_changes) + 1, size=n)
    for c in range(max(1, max_changes)):
        rows = np.flatnonzero(n_changes > c)
        kind = np.searchsorted([0.35, 0.7, 0.85], rng.random(len(rows)), side="right")
        act = active_of(space, out.depth[rows])
        slot = (rng.random(act.shape) * act).argmax(axis=1)
        kr, ks_ = rows[kind == 0], slot[kind == 0]
        if nk > 1:
            out.k[kr, ks_] = (out.k[kr, ks_] + rng.integers(1, nk, size=len(kr))) % nk
        er, es_ = rows[kind == 1], slot[kind == 1]
        if ne > 1:
            out.e[er, es_] = (out.e[er, es_] + rng.integers(1, ne, size=len(er))) % ne
        dr = rows[kind == 2]
        if nd > 1:
            st = rng.integers(0, space.n_stages, size=len(dr))
            d = out.depth[dr, st] + np.where(rng.random(len(dr)) < 0.5, -1, 1)
            out.depth[dr, st] = np.where(d < 0, 1, np.where(d >= nd, nd - 2, d))
        rr = rows[kind == 3]
        if nr > 1:
            size = (rng.integers(1, res_step + 1, size=len(rr)) if res_step > 0
                    else np.full(len(rr), max(1, -res_step)))
            out.r[rr] = np.clip(out.r[rr] + size * np.where(rng.random(len(rr)) < 0.5, -1, 1), 0, nr - 1)
    return out


def repair_down(space: SearchSpace, dec: Decisions, lat: np.ndarray, budgets: np.ndarray,
                latency_fn: Callable[[Decisions], np.ndarray], rng: np.random.Generator, steps: int) -> np.ndarray:
    """Bring rows over their budget down: up to ``steps`` times, each such row lowers the
    kernel or expand of a random active block by one choice (or, where both are the smallest,
    the depth of its stage by one). Changes ``dec`` in place; returns the new latencies
    (recomputed by ``latency_fn`` for the changed rows)."""
    lat = np.asarray(lat, dtype=np.float64).copy()
    budgets = np.asarray(budgets, dtype=np.float64)
    touched = np.zeros(len(lat), dtype=bool)
    for _ in range(max(0, steps)):
        rows = np.flatnonzero(lat > budgets)
        if not len(rows):
            break
        touched[rows] = True
        act = active_of(space, dec.depth[rows])
        slot = (rng.random(act.shape) * act).argmax(axis=1)
        k, e = dec.k[rows, slot], dec.e[rows, slot]
        use_e = np.where((k > 0) & (e > 0), rng.random(len(rows)) < 0.5, e > 0)
        use_k = ~use_e & (k > 0)
        rest = ~use_e & ~use_k
        dec.e[rows[use_e], slot[use_e]] -= 1
        dec.k[rows[use_k], slot[use_k]] -= 1
        if rest.any():
            rr, st = rows[rest], slot[rest] // space.max_depth
            dec.depth[rr, st] = np.maximum(0, dec.depth[rr, st] - 1)
        lat[rows] = latency_fn(dec.select(rows))
    return lat


def mutate_arch(space: SearchSpace, arch: Arch, rng: np.random.Generator, prob: float = 0.1) -> Arch:
    """:func:`mutate` of one arch (inactive slots start as the stage's last block)."""
    from nagkit.space.decisions import from_archs

    return mutate(space, from_archs(space, [arch]), rng, prob).to_archs(space)[0]


def crossover_arch(space: SearchSpace, a: Arch, b: Arch, rng: np.random.Generator) -> Arch:
    """:func:`crossover` of two archs."""
    from nagkit.space.decisions import from_archs

    d = from_archs(space, [a, b])
    return crossover(d.select([0]), d.select([1]), rng).to_archs(space)[0]


def same_arch(space: SearchSpace, a: Decisions, b: Decisions) -> np.ndarray:
    """Row-wise: do ``a`` and ``b`` describe the same architecture (latent slots ignored)?"""
    return (arch_keys(space, a) == arch_keys(space, b)).all(axis=1)
