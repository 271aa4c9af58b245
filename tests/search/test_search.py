"""Baselines behind ask/tell, stopping rules, rewards, hypervolume."""

from __future__ import annotations

import numpy as np
import pytest

from nagkit.data.accuracy import open_accuracy_source
from nagkit.data.synthetic import MacsLatencyTable, tiny_space
from nagkit.errors import UnknownNameError
from nagkit.space import sample_many
from nagkit.search.base import Plateau, QueryBudget, SearchProblem, Steps, TimeLimit, run_search
from nagkit.search.compare import hypervolume
from nagkit.search.factory import make_method
from nagkit.search.methods import REWARDS, default_stop

SP = tiny_space()
TABLE = MacsLatencyTable()


def problem(budget=2.0):
    return SearchProblem(SP, TABLE, open_accuracy_source("synthetic:", SP), budget)


def test_stop_rules_compose_and_query_budget_is_exact():
    stop = Steps(100) | QueryBudget(250) | TimeLimit(60)
    res = run_search(make_method("random", problem(), seed=0), stop)
    assert res.queries == 250 and res.steps == 3
    res = run_search(make_method("random", problem(), seed=0), Steps(2) | QueryBudget(10_000))
    assert res.queries == 200 and res.steps == 2


def test_plateau_stops_a_stalled_search():
    res = run_search(make_method("random", problem(), seed=0), Plateau(2) | Steps(1000))
    assert res.steps < 1000


def test_evolution_is_ofas_evolution_finder():
    prob = problem(2.0)
    evo = make_method("evolution", prob, seed=0, generations=8)
    res = run_search(evo, default_stop("evolution"))
    # a random population of 100, then per generation 50 mutations + 50 crossovers of the 25 best
    assert res.queries == 100 + 8 * 100 and res.steps == 9
    st = res.settings
    assert (st["population"], st["parents"], st["mutations"], st["crossovers"]) == (100, 25, 50, 50)
    assert st["mutate_prob"] == 0.1 and res.latency_ms <= 2.0
    assert res.accuracy > res.history[0][1]  # better than the random population's best
    # OFA returns the best parent seen at the start of a generation: the last generation's
    # children are evaluated (counted) but never considered
    last_children = evo.pop[1][evo.n_parents:]
    assert res.accuracy == pytest.approx(float(evo.parents[1].max()))
    assert len(last_children) == 100 and (evo.pop[2] <= 2.0).all()  # every child fits (rejection sampling)
    # its proposals (children of the best parents, before rejection) fit the budget far more
    # often than uniform archs do, but not always: nothing rejected them yet
    props = evo.proposals(200)
    fit = float(np.mean(TABLE.predict_many(SP, props) <= 2.0))
    uniform = float(np.mean(TABLE.predict_many(SP, sample_many(SP, 2000, seed=0)) <= 2.0))
    assert len(props) == 200 and uniform + 0.2 < fit < 1.0


def test_evolution_default_schedule_is_50100_queries():
    evo = make_method("evolution", problem(2.0), seed=0)
    assert (evo.population_size, evo.generations, evo.n_mutate, evo.n_cross) == (100, 500, 50, 50)
    # the initial population plus 500 generations of 100 children (counted per generation above)
    assert default_stop("evolution") == Steps(501)
    assert evo.population_size + evo.generations * (evo.n_mutate + evo.n_cross) == 50_100


def test_same_seed_same_search():
    a = run_search(make_method("evolution", problem(), seed=1, generations=3), Steps(10))
    b = run_search(make_method("evolution", problem(), seed=1, generations=3), Steps(10))
    assert a.arch == b.arch and a.accuracy == b.accuracy


def test_rewards_match_their_papers():
    mnas, tunas = REWARDS.get("mnasnet"), REWARDS.get("tunas")
    assert mnas(0.8, 20.0, 10.0) == pytest.approx(0.8 * 2 ** -0.07)
    assert mnas(0.8, 10.0, 10.0) == pytest.approx(0.8)
    assert tunas(0.8, 15.0, 10.0) == pytest.approx(0.8 - 0.07 * 0.5)
    assert tunas(0.8, 5.0, 10.0) == pytest.approx(0.8 - 0.07 * 0.5)


@pytest.mark.parametrize("name", ["mnasnet", "tunas"])
def test_rl_policy_moves_toward_the_budget(name):
    prob = problem(1.5)
    m = make_method(name, prob, seed=0, batch=40, lr=0.3)
    before = np.abs(TABLE.predict_many(SP, m.proposals(300)) / 1.5 - 1).mean()
    res = run_search(m, Steps(40))
    after = np.abs(TABLE.predict_many(SP, m.proposals(300)) / 1.5 - 1).mean()
    assert res.queries == 1600 and after < before


def test_nsga2_via_pymoo_ask_tell():
    res = run_search(make_method("nsga2", problem(2.0), seed=0), Steps(5))
    assert res.queries == 100 + 4 * 75
    assert res.arch is not None and res.latency_ms <= 2.0 and 0 < res.accuracy < 1


def test_unknown_method_did_you_mean():
    with pytest.raises(UnknownNameError, match="did you mean 'evolution'"):
        make_method("evolutoin", problem())


def test_hypervolume_by_hand():
    # two points: (10 ms, 80%) and (20 ms, 85%), reference (30 ms, 70%)
    assert hypervolume([(10, 80), (20, 85)], 30, 70) == pytest.approx(10 * 10 + 10 * 15)
    # a dominated point adds nothing; points beyond the reference are ignored
    assert hypervolume([(10, 80), (20, 85), (25, 84), (40, 99)], 30, 70) == pytest.approx(250)
    # nothing above the reference accuracy, or nothing within the reference latency: no area
    assert hypervolume([], 30, 70) == 0
    assert hypervolume([(10, 60)], 30, 70) == 0 and hypervolume([(10, 70)], 30, 70) == 0
    assert hypervolume([(35, 90)], 30, 70) == 0
    assert hypervolume([(10, float("nan")), (20, 75)], 30, 70) == pytest.approx(10 * 5)  # NaN accuracy ignored


def test_evolution_rejects_what_breaks_a_further_limit():
    """``SearchProblem.fits``: every arch evolution asks about meets the limit as well as the
    budget (the benchmarks' constrained baseline), and the limit changes the answer."""
    from nagkit.space.decisions import from_archs
    from nagkit.space.resources import SlotResources

    res = SlotResources(SP)
    free = run_search(make_method("evolution", problem(2.0), seed=0, generations=4), Steps(5))
    cap = 0.9 * float(res(from_archs(SP, [free.arch]))["params"][0])  # the free answer breaks it
    fits = lambda dec: res(dec)["params"] <= cap  # noqa: E731
    asked = []
    prob = problem(2.0)
    prob.fits = fits
    evo = make_method("evolution", prob, seed=0, generations=4)
    ask = evo.ask

    def ask_and_keep():  # every batch it asks about
        batch = ask()
        asked.extend(batch)
        return batch

    evo.ask = ask_and_keep
    out = run_search(evo, Steps(5))
    dec = from_archs(SP, asked)
    assert len(asked) == 500 and fits(dec).all() and (TABLE.predict_many(SP, asked) <= 2.0).all()
    assert res(from_archs(SP, [out.arch]))["params"][0] <= cap and out.arch != free.arch
    assert "limits" in evo.settings()["constraint"]
