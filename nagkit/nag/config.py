"""Frozen configs of the NAG pieces (no torch import; workspaces validate their TOML with them).

One configuration serves every workspace: the defaults below are the method (NAG v3,
docs/decisions.md 37; v2's pieces stay selectable for the ablations). A workspace sets only what
depends on its accuracy source's cost: its query budget (``[frontier] total_queries``, the
dataset included; ``queries = 0`` for a source too dear to query during training).

Sections of ``nagkit.toml`` map to these classes: ``[budgets]`` → :class:`BudgetConfig`,
``[surrogate]`` → :class:`SurrogateConfig`, ``[evaluator]`` → :class:`EvaluatorConfig`,
``[generator]`` → :class:`GeneratorConfig`, ``[frontier]`` (with ``[frontier.active]``) →
:class:`FrontierConfig`, ``[inference]`` (with ``[inference.search]``) → :class:`InferenceConfig`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nagkit.errors import SEED_MAX, BadInputError, reject_unknown_keys

C = TypeVar("C")


@dataclass(frozen=True)
class BudgetConfig:
    """K grid budgets evenly spaced over [min_ms, max_ms]: by default the space's whole latency
    range on the table, from its fastest to its slowest network."""

    k: int = 10
    min_ms: float | None = None
    max_ms: float | None = None
    embed_dim: int = 32


@dataclass(frozen=True)
class SurrogateConfig:
    """The accuracy surrogate (:mod:`nagkit.nag.surrogate`): an MLP over the arch's one-hot
    encoding regressing 100 x accuracy, fitted on every queried arch. It screens the frontier
    search's candidates and, as the v3 evaluator, ranks the generator's samples (with the exact
    accuracy of every queried arch). ``first_steps`` on the dataset, ``round_steps`` more after
    each round of queries (warm start), ``final_steps`` on everything at the end."""

    hidden: int = 128
    layers: int = 2
    lr: float = 3e-3
    weight_decay: float = 0.0
    batch_size: int = 256
    first_steps: int = 300
    round_steps: int = 50
    focus: bool = True  # refits put the round's new rows in every batch
    final_steps: int = 300
    seed: int = 0


@dataclass(frozen=True)
class EvaluatorConfig:
    """R(alpha | B; w). ``kind = "surrogate"`` (v3, the default): R is computed from the accuracy
    surrogate and the table: 100 x accuracy (exact for a queried arch, the surrogate's estimate
    otherwise) for an arch within B, below every accuracy, by latency, for one over B, which is
    the Pareto dominance order. ``kind = "learned"`` (v2): three FC layers over [arch encoding, budget embedding g(B), budget-relative
    latency]. ``loss = "pointwise"`` regresses R onto a target whose order is the Pareto
    dominance order (feasible archs by accuracy, above every infeasible one, those by latency);
    ``"pairwise"`` is the paper's hinge loss over all pairs of a minibatch and ``pairwise_budgets``
    budgets. ``accuracy_term = false`` drops accuracy from the dominance (paper Table 3)."""

    kind: str = "surrogate"
    hidden: int = 256
    epochs: int = 150
    min_steps: int = 2000  # at least this many optimizer steps (small datasets: more passes)
    batch_size: int = 512
    lr: float = 2e-3
    weight_decay: float = 0.0
    loss: str = "pointwise"
    accuracy_term: bool = True
    feasible_share: float = 0.8  # pointwise: share of rows paired with a budget they fit
    pairwise_budgets: int = 8  # pairwise: budgets per minibatch (grid budgets drawn at random)
    holdout: float = 0.05
    seed: int = 0


@dataclass(frozen=True)
class GeneratorConfig:
    """f(B; theta): an LSTM policy with constrained decoding (every choice that cannot fit B on
    the table is masked, so every sample fits), trained in two phases: imitation of the frontier
    archive (``imitation_steps`` of teacher forcing on (budget, top archs within it) pairs), then
    REINFORCE on the evaluator's reward (``steps``; the paper's J(theta) with entropy
    ``entropy``). ``reward`` picks the reward of the REINFORCE phase: the evaluator
    (``dominance``), or MnasNet's / TuNAS's with the evaluator's accuracy estimate."""

    hidden: int = 64
    token_dim: int = 16
    imitation_steps: int = 200
    imitation_batch: int = 128
    imitation_top: int = 3  # targets per budget: its top archs within B in the archive
    steps: int = 0
    budgets_per_step: int = 16  # K budgets per REINFORCE step (stratified over the range)
    samples_per_budget: int = 16  # N archs per budget
    lr: float = 2e-3
    rl_lr: float = 5e-4
    entropy: float = 0.01  # lambda
    baseline_decay: float = 0.9
    reward: str = "dominance"
    reward_coef: float = -0.07  # MnasNet's w / TuNAS's beta
    seed: int = 0


@dataclass(frozen=True)
class SearchConfig:
    """The accuracy-guided local search (training: the frontier search; generation:
    ``--search-queries``). Each round, per budget: the ``parents`` most accurate known archs within
    it make ``children * screen`` mutants (1..``max_changes`` small moves, a ``crossover`` share
    crossed with another parent, ``repair`` latency-lowering steps if over budget); a ridge model
    of accuracy, fitted on the known archs with latency in [(1 - ``window``) B, B], keeps the
    best ``children`` new ones, which are queried."""

    queries: int = 0
    parents: int = 8
    children: int = 40
    screen: int = 8
    max_changes: int = 3
    res_step: int = 4
    repair: int = 4
    crossover: float = 0.2
    window: float = 0.25
    rounds: int = 8  # generation: rounds per call


@dataclass(frozen=True)
class ActiveConfig:
    """The surrogate-assisted frontier search (v3, ``[frontier.active]``; decisions 37). Each
    round: ``budgets`` budgets drawn across the table's whole range (one in each of equal
    slices, half of log-latency and half of latency, ``spacing``; decisions 48); per budget, its
    ``parents`` most accurate queried archs within it seed a population of ``population`` that
    evolves ``generations`` generations on the surrogate alone (``children`` mutants per
    generation: 1..``max_changes`` small moves, a ``crossover`` share crossed, ``repair``
    latency-lowering steps if over B); the ``picks`` best new archs per budget by the surrogate
    are queried, and the surrogate is refitted on everything. ``limited``: the share of each
    round's budgets that also carry a parameter limit, drawn between the fewest parameters of a
    queried arch within the budget and those of the most accurate one; the saved archive then
    keeps the best known archs of every (budget, parameter limit) pair (issue 34, decisions 52).
    Off by default: it pays off from about 20,000 queries (benchmarks/constraints/README.md).
    ``explore``: the search's first rounds that rank their populations by capacity (MACs) instead
    of the surrogate, so that they query the most capable archs within each budget (decisions 53;
    0 here, 4 when re-targeted)."""

    budgets: int = 100
    picks: int = 2
    parents: int = 32
    population: int = 48
    generations: int = 6
    children: int = 96
    max_changes: int = 3
    res_step: int = 4
    crossover: float = 0.2
    repair: int = 4
    spacing: str = "mixed"  # the rounds' budgets: half in slices of log-latency, half of latency (decisions 48)
    limited: float = 0.0  # share of a round's budgets that also carry a parameter limit (decisions 52)
    explore: int = 0  # first rounds ranked by MACs instead of the surrogate (decisions 53)


@dataclass(frozen=True)
class RetargetConfig(ActiveConfig):
    """The frontier search of a training that starts from accuracies carried over from another
    latency table (``[frontier.retarget]``; decisions 41). Its archive sits on the other table's
    frontier, so its rounds are smaller (12 budgets x 2 picks: ~41 rounds, and as many refits,
    for 1,000 queries instead of 5) and its populations evolve twice as long on the surrogate
    before a query is spent. Its first 4 rounds (96 queries) rank by MACs: they query the new
    table's capacity frontier, where the carried archive holds little and the surrogate, fitted
    on the old table's frontier, is pessimistic (decisions 53)."""

    budgets: int = 12
    generations: int = 12
    explore: int = 4


@dataclass(frozen=True)
class FrontierConfig(SearchConfig):
    """Training-time frontier search over the whole latency range, within the training's query
    budget: ``total_queries`` in all, the dataset included, for a training from scratch; a
    training that starts from accuracies carried over from another table (``nagkit init --from W
    --latency-table T``) spends at most ``retarget_queries`` new ones. ``queries = -1`` spends
    what the budget leaves after the dataset; ``queries = 0`` makes no query (the dataset alone).

    ``method = "surrogate"`` (v3, the default): :class:`ActiveConfig`, or :class:`RetargetConfig`
    for a training from carried accuracies. ``method = "guided"``
    (v2, for the ablations): the accuracy-guided local search of :mod:`nagkit.nag.guided` at
    ``budgets`` budgets per round with a local ridge screen, then refinement (``refine_rounds``):
    at ``refine_budgets`` budgets the generator's ``refine_samples`` samples are ranked by the
    evaluator and its ``refine_top`` picks queried; the evaluator trains ``refine_epochs`` more
    epochs and the generator imitates the updated archive for ``refine_imitation`` steps."""

    method: str = "surrogate"
    queries: int = -1
    total_queries: int = 5_010  # dataset + frontier search: one-tenth of OFA's evolution for one budget
    retarget_queries: int = 1_000
    active: ActiveConfig = field(default_factory=ActiveConfig)
    retarget: RetargetConfig = field(default_factory=RetargetConfig)
    budgets: int = 20
    refine_rounds: int = 0
    refine_budgets: int = 200
    refine_samples: int = 50
    refine_top: int = 4
    refine_epochs: int = 20
    refine_imitation: int = 150


MIN_QUERIES = 500  # a training that queries its source needs at least this many in all (decisions 37)


@dataclass(frozen=True)
class InferenceConfig:
    """Zero-query generation: ``samples`` archs from pi(.|B) (plus the greedy one) and the frontier
    archive's ``archive`` most accurate archs within B (queried in training), ranked by the
    evaluator. ``search.queries > 0`` adds an accuracy-guided search per budget (counted)."""

    samples: int = 50  # the decode costs ~0.1 ms per sample; quality flat from 32 to 200 (decisions 17)
    archive: int = 3  # the frontier archive's most accurate archs within B join the samples (decisions 41)
    temperature: float = 1.0
    search: SearchConfig = field(default_factory=SearchConfig)


#: The most generator samples per budget (``[inference] samples``, ``--samples``, ``samples=``): 100,000
#: took 81 s and 2.2 GB on the 2-core reference CPU; 10 million ran out of memory (issue 35).
MAX_SAMPLES = 100_000
#: The most architectures a dataset holds: ``[dataset] n`` and ``nagkit dataset --n``.
DATASET_N_MAX = 100_000_000
#: The most epochs of any training loop (``[evaluator] epochs``, ``finetune --epochs``, ``build --finetune``).
MAX_EPOCHS = 100_000

_RANGES: dict[str, tuple[float, float]] = {  # inclusive bounds of numeric fields, by name
    "k": (2, 1000), "embed_dim": (1, 4096), "hidden": (1, 65536), "epochs": (0, MAX_EPOCHS), "min_steps": (0, 10_000_000),
    "batch_size": (1, 1 << 20), "lr": (1e-9, 10.0), "rl_lr": (1e-9, 10.0), "weight_decay": (0.0, 1.0),
    "feasible_share": (0.0, 1.0), "pairwise_budgets": (1, 1000), "holdout": (0.0, 0.5),
    "token_dim": (1, 4096), "imitation_steps": (0, 10_000_000), "imitation_batch": (1, 1 << 20),
    "imitation_top": (1, 1000), "steps": (0, 10_000_000), "budgets_per_step": (1, 10_000),
    "samples_per_budget": (1, 100_000), "entropy": (0.0, 100.0), "baseline_decay": (0.0, 1.0),
    "reward_coef": (-100.0, 100.0), "queries": (-1, 100_000_000), "parents": (1, 100_000),
    "children": (1, 1_000_000), "screen": (1, 1000), "max_changes": (1, 100), "res_step": (-1000, 1000),
    "repair": (0, 1000), "crossover": (0.0, 1.0), "window": (0.0, 1.0), "rounds": (0, 100_000),
    "total_queries": (0, 1_000_000_000), "budgets": (1, 10_000), "samples": (1, MAX_SAMPLES), "archive": (0, 1000),
    "temperature": (1e-3, 100.0), "refine_rounds": (0, 1000), "refine_budgets": (1, 100_000),
    "refine_samples": (1, 100_000), "refine_top": (1, 1000), "refine_epochs": (0, 100_000),
    "refine_imitation": (0, 10_000_000), "min_ms": (0.0, 1e9), "max_ms": (0.0, 1e9), "seed": (0, SEED_MAX),
    "layers": (1, 16), "first_steps": (0, 10_000_000), "round_steps": (0, 10_000_000), "final_steps": (0, 10_000_000),
    "retarget_queries": (0, 1_000_000_000), "picks": (1, 100_000), "population": (1, 100_000),
    "generations": (0, 10_000), "limited": (0.0, 1.0), "explore": (0, 100_000),
}
SPACINGS = ("log", "linear", "mixed")  # ActiveConfig.spacing, nagkit.nag.guided.stratified
_CHOICES = {"loss": ("pointwise", "pairwise"), "reward": ("dominance", "mnasnet", "tunas"),
            "kind": ("surrogate", "learned"), "method": ("surrogate", "guided"), "spacing": SPACINGS}


def config_from_dict(cls: type[C], d: dict[str, Any] | None, where: str) -> C:
    """Build a (nested) config dataclass from a TOML table: unknown keys get a did-you-mean,
    values are checked against the field's type, numeric ranges and choices."""
    d = dict(d or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    reject_unknown_keys(d, list(fields), where)
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for k, v in d.items():
        t = hints[k]
        if dataclasses.is_dataclass(t):
            if not isinstance(v, dict):
                raise BadInputError(f"{where}.{k} must be a table, got {_short(v)}")
            out[k] = config_from_dict(t, v, f"{where}.{k}")
            continue
        out[k] = _check_value(t, v, f"{where}.{k}")
        if k in _CHOICES and v not in _CHOICES[k]:
            raise BadInputError(f"{where}.{k} = {_short(v)} is not one of {', '.join(_CHOICES[k])}")
    return cls(**out)


def _check_value(t: Any, v: Any, name: str) -> Any:
    allowed = typing.get_args(t) or (t,)
    if v is None and type(None) in allowed:
        return v
    ok = (bool in allowed and isinstance(v, bool)) or (
        not isinstance(v, bool) and ((int in allowed and isinstance(v, int))
                                     or (float in allowed and isinstance(v, (int, float))))
    ) or (str in allowed and isinstance(v, str))
    if not ok:
        names = " | ".join(getattr(a, "__name__", str(a)) for a in allowed)
        raise BadInputError(f"{name} must be of type {names}, got {_short(v)}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if isinstance(v, float) and not math.isfinite(v):
            raise BadInputError(f"{name} must be a finite number, got {v}")
        lo, hi = _RANGES.get(name.rsplit(".", 1)[-1], (-math.inf, math.inf))
        if not lo <= v <= hi:
            raise BadInputError(f"{name} = {_short(v)} is out of range [{_bound(lo)}, {_bound(hi)}]")
    return v


def _bound(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _short(v: Any) -> str:
    from nagkit.errors import short_repr

    return short_repr(v, 60)


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


@contextmanager
def flush_denormals():
    """Run the block with denormal floats flushed to zero, then back to torch's default (off).

    The decode's float32 LSTM state and gates can go denormal: on the ofa-cpu-w1.0 table that made
    generation 2x slower (19.8 vs 9.2 ms for 51 samples on the 2-core CPU). Flushing changes values
    below 1e-38 only; the picks stay the same (tests/nag/test_generator.py). Inference only:
    training keeps IEEE arithmetic."""
    import torch

    on = torch.set_flush_denormal(True)
    try:
        yield on
    finally:
        if on:
            torch.set_flush_denormal(False)


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
