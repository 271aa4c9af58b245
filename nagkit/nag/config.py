"""Frozen configs of the NAG pieces (no torch import; workspaces validate their TOML with them)."""

from __future__ import annotations

import dataclasses
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from nagkit.errors import BadInputError, reject_unknown_keys

C = TypeVar("C")


@dataclass(frozen=True)
class BudgetConfig:
    """K grid budgets evenly spaced over [min_ms, max_ms] (default: the dataset's latency range)."""

    k: int = 10
    min_ms: float | None = None
    max_ms: float | None = None
    embed_dim: int = 32


@dataclass(frozen=True)
class EvaluatorConfig:
    """R(alpha | B; w): three FC layers over [arch encoding, budget embedding]."""

    hidden: int = 256
    epochs: int = 40
    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-5
    random_budgets: int = 6  # extra uniformly drawn budgets per step (trains the interpolation)
    holdout: float = 0.1
    latency_feature: bool = True  # append table latency (ms, scaled) to the arch encoding
    aux_regression: float = 0.0  # weight of an auxiliary accuracy-regression loss (0: off)
    # Beyond the paper: also feed the budget-relative latency ((c - B) / B and c <= B) to the
    # first layer, so R can change sharply where an arch crosses the budget instead of
    # smoothing the step over the budget embedding (which made R prefer archs well under B).
    budget_feature: bool = False
    seed: int = 0


@dataclass(frozen=True)
class GeneratorConfig:
    """f(B; theta): LSTM policy trained with REINFORCE on the evaluator's reward."""

    hidden: int = 64
    token_dim: int = 16
    steps: int = 600
    budgets_per_step: int = 10  # K budgets per step (stratified over the grid intervals)
    samples_per_budget: int = 32  # N archs per budget
    lr: float = 3e-3
    entropy: float = 0.01  # lambda
    baseline_decay: float = 0.9
    # Extra penalty (in R units) on sampled archs over their budget by the table latency:
    # reward = R - penalty * (1 + 10 * (c/B - 1)) when c > B. 0 = the paper's pure R.
    infeasible_penalty: float = 0.0
    # Frontier refinement: after training, sample archs from the generator, query the
    # accuracy source for them (counted), add them to the data, fine-tune evaluator and
    # generator. 0 rounds = the paper's one-shot training on the uniform dataset.
    refine_rounds: int = 0
    refine_samples: int = 1000  # accuracy queries per round (at most)
    refine_budgets: int = 20  # budgets per round (one per slice of the range)
    refine_pool: int = 200  # generator samples per budget to choose the queried archs from
    refine_temperature: float = 1.5  # sampling temperature of those samples (diversity)
    refine_oversample: int = 8  # refinement samples appear this many times per evaluator epoch
    refine_epochs: int = 6
    refine_steps: int = 200
    # Beyond the paper: > 0 picks each round's queried archs by evaluator-guided local search
    # (nagkit.nag.local, this many rounds) from the generator's samples, so the queries land on
    # the evaluator's own optimum per budget, where its errors matter (0: generator samples only).
    refine_local_rounds: int = 0
    refine_niches: int = 1  # resolution niches of that local search (see InferenceConfig.local_niches)
    # Beyond the paper (docs/decisions.md 15): > 0 also runs, each refinement round, an
    # accuracy-source-guided local search (nagkit.nag.local.source_search) at the round's
    # budgets, started from the data's `refine_search_seeds` most accurate archs within each
    # budget and capped at this many queries per budget; what it finds joins the data (counted
    # as refinement queries). It shows the evaluator the best basins the data knows of, which
    # the generator's own samples may never reach. 0: off.
    refine_search_queries: int = 0
    refine_search_seeds: int = 30
    refine_search_rounds: int = 5
    refine_search_from: float = 0.0  # its budgets start this fraction of the way up the grid's range
    seed: int = 0


@dataclass(frozen=True)
class InferenceConfig:
    samples: int = 500
    max_rounds: int = 10  # bounded resampling when no sample fits the budget
    rerank: int = 0  # top candidates re-scored by the accuracy source (0: evaluator only)
    temperature: float = 1.0  # sampling temperature of pi(.|B)
    # Beyond the paper: evaluator-guided local refinement of the samples (nagkit.nag.local):
    # rounds of `local_children` mutants per budget from its `local_parents` best, keeping the
    # `local_keep` best unique archs within B by the table. No accuracy-source queries. 0: off.
    local_rounds: int = 0
    local_children: int = 200
    local_parents: int = 20
    local_keep: int = 100
    local_prob: float = 0.1
    # > 1: search that many resolution niches per budget (samples re-seeded at resolutions
    # spread over the space's), children/parents/keep split among them; re-ranking takes the
    # niches' best in turn. Without it the search stays near the generator's resolution.
    local_niches: int = 1
    # Beyond the paper: after re-ranking (needs rerank > 0), `polish_rounds` rounds that mutate
    # the `polish_parents` most accurate re-ranked archs per budget into `polish_children`
    # mutants and query the accuracy source for the `polish_queries` best of them by the
    # evaluator (within B by the table; every query counted). 0: off.
    polish_rounds: int = 0
    polish_queries: int = 30
    polish_parents: int = 5
    polish_children: int = 300
    polish_crossover: float = 0.0  # share of polishing children made by crossover of two parents
    # Beyond the paper (docs/decisions.md 11): after re-ranking and polishing (needs rerank > 0),
    # an accuracy-source-guided local search (nagkit.nag.local.source_search), all budgets
    # batched. Each of up to `search_rounds` rounds mutates the `search_parents` most accurate
    # queried archs per budget with 1..`search_max_changes` small moves (a kernel, an expand, a
    # stage depth +-1, the resolution by 1..`search_res_step` steps; exactly -N steps when
    # negative) into `search_children` x `search_screen` mutants; mutants over B get up to
    # `search_repair` latency-lowering steps; with `search_screen` > 1 a per-budget ridge
    # regression of the queried accuracies on the arch's one-hots (refitted every round, no
    # extra queries) keeps the best `search_children`; every new one within B by the table is
    # queried, until `search_queries` per budget (a hard cap; `nagkit generate
    # --search-queries N` overrides it). `search_crossover`: share of children made by crossover
    # of two parents. Every query counted. search_queries = 0 or search_rounds = 0: off.
    search_rounds: int = 0
    search_queries: int = 0
    search_parents: int = 4
    search_children: int = 100
    search_max_changes: int = 2
    search_res_step: int = 4
    search_repair: int = 0
    search_crossover: float = 0.0
    search_screen: int = 1
    # Beyond the paper (docs/decisions.md 15): > 0 runs the source-guided search with a second
    # population per budget, started from the `archive_seeds` most accurate archs of the
    # workspace's frontier archive within B (re-queried, counted); it gets `archive_share` of
    # `search_queries` (1.0: it alone searches), the re-ranked samples the rest. Needs the
    # archive artifact (`nagkit train` with generator.refine_search_queries > 0). 0: off.
    archive_seeds: int = 0
    archive_share: float = 0.5


def config_from_dict(cls: type[C], d: dict[str, Any] | None, where: str) -> C:
    """Build a config dataclass, rejecting unknown keys with a did-you-mean."""
    d = dict(d or {})
    names = [f.name for f in dataclasses.fields(cls)]
    reject_unknown_keys(d, names, where)
    types = {f.name: f.type for f in dataclasses.fields(cls)}
    for k, v in d.items():
        t = str(types[k])
        ok = {
            "int": isinstance(v, int) and not isinstance(v, bool),
            "bool": isinstance(v, bool),
            "float": isinstance(v, (int, float)) and not isinstance(v, bool),
            "float | None": v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
        }.get(t, True)
        if not ok:
            raise BadInputError(f"{where}.{k} must be of type {t}, got {v!r}")
    for k in ("archive_share", "refine_search_from"):  # fractions
        if k in d and not 0.0 <= float(d[k]) <= 1.0:
            raise BadInputError(f"{where}.{k} must be between 0 and 1, got {d[k]!r}")
    return cls(**d)


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


@contextmanager
def torch_threads(n: int | None = None):
    """Run torch with ``n`` intra-op threads (default ``NAGKIT_TORCH_THREADS`` or 1).

    The NAG models are small: on a shared 2-core CPU, two OpenMP threads per op were 8-80x
    slower than one (spin-waiting under contention), so one thread is the default."""
    n = n or int(os.environ.get("NAGKIT_TORCH_THREADS", "1"))
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(old)
