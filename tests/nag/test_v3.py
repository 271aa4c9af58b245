"""NAG v3 (docs/decisions.md 37): the accuracy surrogate, the surrogate-assisted frontier search,
the query journal (no paid-for query lost; a rerun resumes), re-targeting that carries every
accuracy, and the query budget's minimum."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nagkit.cli.main import main
from nagkit.data.accuracy import open_accuracy_source
from nagkit.data.journal import QueryJournal
from nagkit.data.synthetic import synthetic_accuracy, tiny_workspace_toml
from nagkit.errors import ArtifactError
from nagkit.nag.config import ActiveConfig, SurrogateConfig
from nagkit.nag.frontier import ActiveSearch, run_active
from nagkit.nag.surrogate import make_surrogate
from nagkit.nag.train import load_model, save_model
from nagkit.space import sampling as ops
from nagkit.space.decisions import Pool, from_archs, key_bytes
from tests.nag.helpers import LAT, SP, grid, synthetic_data


def _fitted(n=300, steps=300, seed=0):
    archs, lat, acc = synthetic_data(n, seed=seed)
    dec = from_archs(SP, archs)
    sur = make_surrogate(SP, grid(), SurrogateConfig(hidden=64, seed=seed))
    rep = sur.fit(dec, acc, steps, np.random.default_rng(seed))
    return sur, dec, lat, acc, rep


def test_the_surrogate_learns_accuracy_and_remembers_every_queried_arch_exactly():
    sur, dec, lat, acc, rep = _fitted()
    assert rep["rows"] == 300 and rep["steps"] == 300
    # exact for what was queried (the memory), an estimate that ranks unseen archs well otherwise
    np.testing.assert_allclose(sur.predict(dec), 100 * acc, atol=1e-9)
    archs2, _, acc2 = synthetic_data(200, seed=7)
    fresh = [i for i, k in enumerate(key_bytes(SP, from_archs(SP, archs2))) if k not in set(key_bytes(SP, dec))]
    d2 = from_archs(SP, [archs2[i] for i in fresh])
    est, truth = sur.predict(d2), 100 * acc2[fresh]
    assert np.isnan(sur.recall(d2)).all()
    from scipy.stats import kendalltau

    assert kendalltau(est, truth).statistic > 0.6
    before = np.abs(est - truth).mean()
    sur.fit(concat_dec(dec, d2), np.r_[acc, acc2[fresh]], 100, np.random.default_rng(1))  # warm refit
    np.testing.assert_allclose(sur.predict(d2), truth, atol=1e-9)  # now remembered
    assert before > 0


def test_the_memory_stays_exact_when_two_archs_share_a_hash(monkeypatch):
    """recall hashes each arch's key to one integer; a clash (here: every arch hashes alike) is
    resolved on the whole key, so no arch reads another's accuracy."""
    import nagkit.nag.surrogate as S

    sur, dec, _, acc, _ = _fitted(n=120, steps=5)
    archs2, _, _ = synthetic_data(80, seed=9)
    probe = concat_dec(dec, from_archs(SP, archs2))
    exact = sur.recall(probe)
    monkeypatch.setattr(S, "_hash", lambda keys: np.zeros(len(keys), dtype=np.uint64))
    sur._lookup = None
    clashing = sur.recall(probe)
    np.testing.assert_array_equal(clashing, exact)
    np.testing.assert_allclose(clashing[:120], 100 * acc, atol=1e-9)
    known = set(key_bytes(SP, dec))
    assert all(np.isnan(clashing[120 + i]) == (k not in known) for i, k in enumerate(key_bytes(SP, from_archs(SP, archs2))))


def concat_dec(a, b):
    from nagkit.space.decisions import concat

    return concat(a, b)


def test_the_surrogate_as_evaluator_orders_by_dominance_and_round_trips(tmp_path):
    sur, dec, lat, acc, _ = _fitted(steps=50)
    x = sur.features(dec, lat)
    b = float(np.median(lat))
    with torch.no_grad():
        s = sur.score(x, torch.full((len(dec),), b)).numpy()
    fit = lat <= b
    assert s[fit].min() > s[~fit].max()  # every arch within B above every arch over it
    over = np.flatnonzero(~fit)
    order = over[np.argsort(lat[over])]
    assert np.all(np.diff(s[order]) <= 1e-6)  # over B: the slower, the lower
    np.testing.assert_allclose(s[fit], 100 * acc[fit], atol=1e-4)  # within B: the remembered accuracy
    path = tmp_path / "evaluator.pt"
    save_model(path, sur, {"seed": 0}, {})
    back, meta = load_model(path, "evaluator", SP)
    assert meta["kind"] == "surrogate" and type(back).__name__ == "Surrogate"
    torch.testing.assert_close(back.score(back.features(dec, lat), torch.full((len(dec),), b)), torch.from_numpy(s))


def _record_asks(search: ActiveSearch) -> list:
    """Wrap ``search.ask`` so that every round's picks are kept, in order, in the returned list."""
    asked: list = []
    orig = search.ask

    def ask():
        p = orig()
        asked.append(p)
        return p

    search.ask = ask
    return asked


def test_the_active_search_queries_only_new_archs_within_their_budget_up_to_its_cap():
    archs, lat, acc = synthetic_data(150, seed=2)
    known = Pool(from_archs(SP, archs), np.zeros(150), lat, acc)
    src = open_accuracy_source("synthetic:", SP)
    runs = []
    for _ in range(2):
        sur = make_surrogate(SP, grid(), SurrogateConfig(hidden=32, seed=0))
        search = ActiveSearch(SP, LAT, ActiveConfig(budgets=8, picks=2, generations=3, children=20),
                              SurrogateConfig(hidden=32, round_steps=10), sur, known, cap=97, seed=3)
        search.fit(60)
        asked = _record_asks(search)
        q0 = src.queries
        out = run_active(search, src.evaluate_decisions)
        assert src.queries - q0 == 97 == search.used and len(out) == 150 + 97
        runs.append([str(a) for a in out.dec.to_archs(SP)])
    assert runs[0] == runs[1]  # same seed, same search
    picked = [k for p in asked for k in key_bytes(SP, p.dec)]
    assert len(set(picked)) == len(picked) and not set(picked) & set(key_bytes(SP, known.dec))
    truth = np.array([synthetic_accuracy(SP, a) for a in out.dec.to_archs(SP)[150:]])
    np.testing.assert_allclose(out.accuracy[150:], truth)


def _search(n: int, data_seed: int, cfg: ActiveConfig, *, cap: int, seed: int) -> tuple[Pool, ActiveSearch]:
    """``n`` synthetic known archs and an active search over them, its surrogate fitted 40 steps."""
    archs, lat, acc = synthetic_data(n, seed=data_seed)
    known = Pool(from_archs(SP, archs), np.zeros(n), lat, acc)
    sur = make_surrogate(SP, grid(), SurrogateConfig(hidden=32, seed=0))
    search = ActiveSearch(SP, LAT, cfg, SurrogateConfig(hidden=32, round_steps=5), sur, known, cap=cap, seed=seed)
    search.fit(40)
    return known, search


def test_a_round_whose_populations_hold_nothing_new_is_filled_from_its_children():
    """Populations of 2 cannot give 8 picks per budget: the round is filled from every child its
    generations scored (decisions 44), each new, queried once, and within the budget it was
    found for. Without the fill a round asked at most 8 archs, and the search took 4x the rounds."""
    src = open_accuracy_source("synthetic:", SP)
    cfg = ActiveConfig(budgets=4, picks=8, parents=2, population=2, generations=2, children=24,
                       spacing="log")  # the draw this test's counts were worked out with
    known, search = _search(150, 5, cfg, cap=100, seed=1)
    draw, budgets = search.draw, []
    search.draw = lambda rng: budgets.append(np.sort(draw(rng))) or budgets[-1]
    asked = _record_asks(search)
    out = run_active(search, src.evaluate_decisions)
    assert [len(p) for p in asked] == [32, 32, 32, 4] and search.used == 100 == len(out) - 150
    assert search.rounds == 4 and search.refilled == 3  # the last round's 4 came from the populations
    for b, p in zip(budgets, asked):
        assert np.all(p.latency <= b[p.group] * (1 + 1e-12))
    picked = [k for p in asked for k in key_bytes(SP, p.dec)]
    assert len(set(picked)) == len(picked) and not set(picked) & set(key_bytes(SP, known.dec))


def test_limited_budgets_keep_their_populations_under_a_parameter_limit():
    """``limited`` (decisions 52): half the budgets carry a parameter limit between the fewest
    parameters of a known arch within the budget and those of its most accurate one; their
    parents and every surviving child meet it, as every row meets its budget."""
    from nagkit.space.resources import SlotResources

    cfg = ActiveConfig(budgets=8, picks=2, generations=3, children=20, limited=0.5)
    known, search = _search(200, 4, cfg, cap=60, seed=2)
    budgets = np.sort(search.draw(search.rng))
    limits = search._limits(budgets)
    res = SlotResources(SP)

    def params(dec):
        return res.per_row("params", dec)

    known_p = params(known.dec)
    assert np.isfinite(limits).sum() == 4
    for g in np.flatnonzero(np.isfinite(limits)):
        inside = known.latency <= budgets[g]
        assert known_p[inside].min() <= limits[g] <= known_p[inside][np.argmax(known.accuracy[inside])]
    pop = search._parents(budgets, limits)
    for _ in range(3):
        pop = search._generation(pop, budgets, limits)
    assert np.all(pop.latency <= budgets[pop.group] * (1 + 1e-12))
    assert np.all(params(pop.dec) <= limits[pop.group])
    assert np.isfinite(limits[pop.group]).sum() > 10  # the limited budgets have populations
    out = run_active(search, open_accuracy_source("synthetic:", SP).evaluate_decisions)
    assert search.used == 60 and len(out) == 260


def test_the_first_explore_rounds_pick_by_macs_then_the_surrogate_takes_over():
    """``explore`` (decisions 53): in the search's first ``explore`` rounds each budget's picks are
    its new archs with the most MACs, afterwards those the surrogate rates best; every pick stays
    within its budget and new."""
    from nagkit.space.resources import SlotResources

    cfg = ActiveConfig(budgets=6, picks=2, generations=3, children=20, explore=2)
    known, search = _search(150, 6, cfg, cap=48, seed=4)
    seen_before = set(key_bytes(SP, known.dec))
    rounds = []
    orig = search._picks

    def picks(pop, n_max):  # the round's final populations and what was picked from them
        out = orig(pop, n_max)
        rounds.append((pop, out))
        return out

    search._picks = picks
    out = run_active(search, open_accuracy_source("synthetic:", SP).evaluate_decisions)
    assert search.used == 48 == len(out) - 150 and len(rounds) == 4
    macs = SlotResources(SP)
    for r, (pop, chosen) in enumerate(rounds):
        rule = np.log(macs.per_row("macs", pop.dec)) if r < 2 else None
        if rule is not None:
            np.testing.assert_allclose(pop.accuracy, rule)
        else:  # the surrogate's estimate, exact for the queried archs
            assert not np.allclose(pop.accuracy, np.log(macs.per_row("macs", pop.dec)))
        new = np.array([k not in seen_before for k in key_bytes(SP, pop.dec)])
        for g in np.unique(chosen.group):
            mine = key_bytes(SP, chosen.dec.select(np.flatnonzero(chosen.group == g)))
            cand = np.flatnonzero((pop.group == g) & new)
            best = cand[np.argsort(-pop.accuracy[cand], kind="stable")][:len(mine)]
            assert sorted(mine) == sorted(key_bytes(SP, pop.dec.select(best)))
        seen_before |= set(key_bytes(SP, chosen.dec))


# -- the workspace level: journal, resume, re-targeting, the minimum budget ----------------------
SMALL = {"surrogate": {"hidden": 32, "first_steps": 60, "round_steps": 10, "final_steps": 30},
         "frontier.active": {"budgets": 10, "picks": 2, "generations": 2, "children": 16},
         "generator": {"hidden": 32, "imitation_steps": 30, "imitation_batch": 64}}


def _tiny(tmp_path, **sections):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "nagkit.toml").write_text(tiny_workspace_toml(**{**SMALL, **sections}))
    return ws


def test_a_failing_source_loses_no_paid_query_and_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    from nagkit.data.accuracy import BaseAccuracySource

    ws = _tiny(tmp_path, dataset={"n": 600}, frontier={"total_queries": 900})
    assert main(["dataset", "--workspace", str(ws)]) == 0
    real = BaseAccuracySource.evaluate_decisions
    answered = {"n": 0}

    def flaky(self, dec):
        if answered["n"] >= 150:
            raise ConnectionError("the accuracy server went away")
        out = real(self, dec)
        answered["n"] += len(out)
        return out

    monkeypatch.setattr(BaseAccuracySource, "evaluate_decisions", flaky)
    assert main(["train", "--workspace", str(ws)]) == 3
    journal = (ws / "queries.jsonl").read_text().splitlines()
    assert len(journal) - 1 == answered["n"] >= 150  # every answered query journaled
    assert not (ws / "generator.pt").exists()
    monkeypatch.setattr(BaseAccuracySource, "evaluate_decisions", real)
    capsys.readouterr()
    assert main(["train", "--workspace", str(ws), "--json"]) == 0
    q = json.loads(capsys.readouterr().out)["accuracy_queries"]
    assert q["journaled_before"] == answered["n"] and q["new"] == 300 - answered["n"]
    assert q["total"] == 900 and len((ws / "queries.jsonl").read_text().splitlines()) - 1 == 300
    # a third run: the budget is spent, nothing new is queried
    assert main(["train", "--workspace", str(ws), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy_queries"]["new"] == 0


def test_retargeting_carries_every_accuracy_and_spends_only_retarget_queries(tmp_path, capsys, monkeypatch):
    """ofa-cpu-w1.0 (OFA's predictor) with a small budget: trained on the LiteRT table, then
    re-targeted to the ONNX Runtime table with `nagkit init --latency-table`."""
    from nagkit.resources import LATENCY_TABLES

    monkeypatch.setenv("NAGKIT_HOME", str(tmp_path / "home"))
    w = tmp_path / "w"
    w.mkdir()
    sections = {**SMALL, "dataset": {"n": 300}, "frontier": {"total_queries": 600, "retarget_queries": 100},
                "frontier.retarget": {"budgets": 5, "picks": 2, "generations": 2, "children": 16}}
    (w / "nagkit.toml").write_text(
        'name = "w"\nlatency_table = "latency_tables/cpu-litert-1t-ofa-mbv3-w1.0.json"\n'
        'accuracy = "ofa-predictor:ofa/acc_predictor.pth"\nseed = 0\n\n[space]\npreset = "ofa-mbv3-w1.0"\n'
        "resolutions = [224]\n" + "".join(f"\n[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in vals.items())
                                         for sec, vals in sections.items()))
    assert main(["dataset", "--workspace", str(w), "--n", "300"]) == 0
    capsys.readouterr()
    assert main(["train", "--workspace", str(w), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["accuracy_queries"]
    assert first["carried"] == 0 and first["total"] == 600 == first["budget"] + 300
    assert out["frontier_search"]["kind"] == "active" and out["frontier_search"]["explore_queries"] == 0
    t = tmp_path / "ort"
    table = LATENCY_TABLES / "cpu-onnxruntime-1t-ofa-mbv3-w1.0.json"
    assert main(["init", str(t), "--from", str(w), "--latency-table", str(table)]) == 0
    assert (t / "queries.jsonl").is_file() and not (t / "generator.pt").exists()
    head = json.loads((t / "dataset.jsonl").read_text().splitlines()[0])
    assert head["carried_from"]["sha256"] != head["latency_table"]["sha256"]
    capsys.readouterr()
    assert main(["train", "--workspace", str(t), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    q = out["accuracy_queries"]
    assert q["carried"] == first["total"] and q["new"] == 100 == q["cap"]
    # the re-targeted search ([frontier.retarget]): rounds of 5 budgets x 2 picks, so 10 rounds for
    # 100 queries where [frontier.active]'s 10 x 2 would make 5 (decisions 41); its first 4 rounds
    # rank by MACs (decisions 53)
    assert out["frontier_search"] == {"kind": "retarget", "rounds": 10, "explore_queries": 40}
    rows = [json.loads(x) for x in (t / "queries.jsonl").read_text().splitlines()[1:]]
    assert len({r["table"] for r in rows}) == 2 and len(rows) == first["new"] + 100
    assert main(["train", "--workspace", str(t), "--json"]) == 0  # a rerun: nothing more to spend
    assert json.loads(capsys.readouterr().out)["accuracy_queries"]["new"] == 0


def test_a_training_with_limited_budgets_saves_every_budget_and_limits_best_archs(tmp_path):
    """With ``[frontier.active] limited`` the saved archive also holds the (latency, parameters)
    frontier layers of everything known (decisions 52): the 3 best known archs within any budget
    and parameter limit are in it, so generation under --max-params can rank them."""
    from nagkit.app.workspace import load_workspace
    from nagkit.latency.slots import SlotLatency
    from nagkit.nag.archive import Archive
    from nagkit.space.arch import Arch
    from nagkit.space.resources import SlotResources

    ws = _tiny(tmp_path, dataset={"n": 300}, frontier={"total_queries": 600},
               **{"frontier.active": {**SMALL["frontier.active"], "limited": 0.5}})
    assert main(["dataset", "--workspace", str(ws)]) == 0
    assert main(["train", "--workspace", str(ws)]) == 0
    rows = [json.loads(line) for f in ("dataset.jsonl", "queries.jsonl")
            for line in (ws / f).read_text().splitlines()[1:]]
    w = load_workspace(str(ws))
    dec = from_archs(w.space, [Arch.from_string(r["arch"]) for r in rows])
    lat, acc = SlotLatency(w.latency_table, w.space)(dec), np.array([r["accuracy"] for r in rows])
    par = SlotResources(w.space).per_row("params", dec)
    saved = Archive.load(ws / "archive.jsonl", w.space)
    kept = set(key_bytes(w.space, saved.dec))
    latency_only = Archive.from_decisions(dec, lat, acc, 3)
    assert len(saved) > len(latency_only)
    rng = np.random.default_rng(0)
    for b, p in zip(rng.uniform(lat.min(), lat.max(), 50), rng.uniform(par.min(), par.max(), 50)):
        ok = np.flatnonzero((lat <= b) & (par <= p))
        best = ok[np.argsort(-acc[ok], kind="stable")[:3]]
        assert set(key_bytes(w.space, dec.select(best))) <= kept


def test_a_query_budget_below_the_minimum_exits_2_naming_it(tmp_path, capsys):
    ws = _tiny(tmp_path, dataset={"n": 300}, frontier={"total_queries": 400})
    assert main(["dataset", "--workspace", str(ws)]) == 0
    capsys.readouterr()
    assert main(["train", "--workspace", str(ws)]) == 2
    err = capsys.readouterr().err
    assert "total_queries = 400 is below the 500" in err and "Traceback" not in err
    assert not (ws / "evaluator.pt").exists() and not (ws / "queries.jsonl").exists()


def test_a_journal_of_another_source_is_refused(tmp_path):
    j = QueryJournal(tmp_path / "q.jsonl", SP, {"name": "synthetic", "spec": "synthetic:"})
    j.append(ops.random_decisions(SP, 3, np.random.default_rng(0)).to_archs(SP), np.array([0.1, 0.2, 0.3]), "t")
    with open(tmp_path / "q.jsonl", "a") as f:
        f.write('{"arch": "r3')  # torn by a kill
    assert len(j.read()) == 3
    other = QueryJournal(tmp_path / "q.jsonl", SP, {"name": "supernet", "spec": "supernet:x.pt"})
    with pytest.raises(ArtifactError, match="cannot be used here|not of this workspace"):
        other.read()


@pytest.mark.parametrize("spacing", ["linear", "log", "mixed"])
def test_each_round_draws_one_budget_in_each_slice_of_the_range(spacing):
    """The frontier search's budgets (decisions 48): one in each of n equal slices of latency,
    of log-latency, or half the slices each way (the default); all within the table's range."""
    from nagkit.nag.guided import stratified

    lo, hi, n = 2.0, 100.0, 10
    b = np.sort(stratified(lo, hi, n, spacing)(np.random.default_rng(3)))
    assert len(b) == n and lo <= b.min() and b.max() <= hi
    lin, log = np.linspace(lo, hi, n + 1), np.exp(np.linspace(np.log(lo), np.log(hi), n + 1))
    if spacing == "linear":
        assert (np.searchsorted(lin, b) == np.arange(1, n + 1)).all()
    elif spacing == "log":
        assert (np.searchsorted(log, b) == np.arange(1, n + 1)).all()
    else:  # 5 log slices and 5 linear ones: the low end is covered more densely than linear alone
        assert (b < lin[1]).sum() >= 2
    assert ActiveConfig().spacing == "mixed"

