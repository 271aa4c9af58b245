"""Seeded sampling, mutation and crossover (OFA's evolutionary operators).

All randomness comes from an explicit ``numpy.random.Generator``. Mutation and crossover work
on the full OFA genome (every block slot, active or not), so they behave like OFA's: a slot
beyond a stage's depth keeps a latent value that becomes visible if the depth grows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace


@dataclass(frozen=True)
class Genome:
    """OFA-style genome: kernel/expand for every slot, depth per stage, resolution."""

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


def genome_of(space: SearchSpace, arch: Arch, rng: np.random.Generator | None = None) -> Genome:
    """The genome of an arch; inactive slots are filled at random (or from the last block)."""
    md = space.max_depth
    ks, es = [], []
    for st in arch.stages:
        for i in range(md):
            if i < len(st):
                k, e = st[i]
            elif rng is not None:
                k, e = _choice(rng, space.ks_list), _choice(rng, space.expand_list)
            else:
                k, e = st[-1]
            ks.append(k)
            es.append(e)
    return Genome(tuple(ks), tuple(es), arch.depths, arch.r)


def sample(space: SearchSpace, rng: np.random.Generator) -> Arch:
    """A uniformly random architecture (each choice independent, as in OFA)."""
    return random_genome(space, rng).to_arch(space)


def sample_many(space: SearchSpace, n: int, seed: int) -> list[Arch]:
    rng = np.random.default_rng(seed)
    return [sample(space, rng) for _ in range(n)]


def mutate_genome(space: SearchSpace, g: Genome, rng: np.random.Generator, prob: float = 0.1) -> Genome:
    """OFA's ``mutate_sample``: each slot's kernel and expand, each depth and the resolution
    are resampled independently with probability ``prob``."""
    r = _choice(rng, space.resolutions) if rng.random() < prob else g.r
    ks = tuple(_choice(rng, space.ks_list) if rng.random() < prob else k for k in g.ks)
    es = tuple(_choice(rng, space.expand_list) if rng.random() < prob else e for e in g.e)
    ds = tuple(_choice(rng, space.depth_list) if rng.random() < prob else d for d in g.d)
    return Genome(ks, es, ds, r)


def crossover_genome(g1: Genome, g2: Genome, rng: np.random.Generator) -> Genome:
    """OFA's ``crossover_sample``: every gene independently from either parent."""

    def pick(a, b):
        return tuple(x if rng.random() < 0.5 else y for x, y in zip(a, b))

    return Genome(pick(g1.ks, g2.ks), pick(g1.e, g2.e), pick(g1.d, g2.d), g1.r if rng.random() < 0.5 else g2.r)


def mutate(space: SearchSpace, arch: Arch, rng: np.random.Generator, prob: float = 0.1) -> Arch:
    return mutate_genome(space, genome_of(space, arch, rng), rng, prob).to_arch(space)


def crossover(space: SearchSpace, a: Arch, b: Arch, rng: np.random.Generator) -> Arch:
    return crossover_genome(genome_of(space, a, rng), genome_of(space, b, rng), rng).to_arch(space)
