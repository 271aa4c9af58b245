"""The NAG workflow through the CLI on a tiny synthetic workspace."""

from __future__ import annotations

import json

import pytest

from nagkit.cli.main import main
from nagkit.data.synthetic import tiny_workspace_toml


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def trained_ws(tmp_path_factory):
    ws = tmp_path_factory.mktemp("ws")
    (ws / "nagkit.toml").write_text(tiny_workspace_toml())
    assert main(["dataset", "--workspace", str(ws), "--json"]) == 0
    assert main(["train", "--workspace", str(ws), "--json"]) == 0
    return ws


def _range(ws):
    meta = json.loads((ws / "generator.json").read_text())
    return meta["grid"]["values"][0], meta["grid"]["values"][-1]


@pytest.mark.slow
def test_dataset_train_generate(trained_ws, capsys):
    ws = trained_ws
    for f in ("dataset.jsonl", "evaluator.pt", "generator.pt", "generator.json", "archive.jsonl", "queries.jsonl"):
        assert (ws / f).is_file(), f
    meta = json.loads((ws / "generator.json").read_text())
    q = meta["provenance"]["accuracy_queries"]
    # NAG v3: the dataset and the frontier search share total_queries; every new query is journaled
    assert q["dataset"] == 600 and q["frontier_search"] == 400 and q["refinement"] == 0
    assert q["total"] == 600 + 400 == q["budget"] + 600 and q["carried"] == 0
    assert len((ws / "queries.jsonl").read_text().splitlines()) == 1 + 400
    lo, hi = _range(ws)
    mid = round((lo + hi) / 2, 3)
    rc, out, _ = run(capsys, "generate", "--workspace", str(ws), "--budget", str(mid), "--budget", str(hi), "--json")
    assert rc == 0
    res = json.loads(out)["results"]  # strict JSON
    assert [r["budget_ms"] for r in res] == [mid, hi]
    for r in res:
        best = r["best"]
        assert best["latency_ms"] <= r["budget_ms"] and r["selection_queries"] == 0 and r["display_queries"] == 1
        assert 0 < best["accuracy"] < 1 and r["accuracy_source"] == "synthetic"
        assert best["ofa"]["d"] and best["arch"].startswith("r")
    rc, out, _ = run(capsys, "generate", "--workspace", str(ws), "--budget", str(mid), "--no-accuracy", "--json")
    assert rc == 0 and json.loads(out)["results"][0]["display_queries"] == 0
    rc, out, _ = run(capsys, "generate", "--workspace", str(ws), "--budget", str(mid))
    assert rc == 0 and "display only" in out and "(synthetic" in out and "latency table" in out
    assert "0 accuracy queries to choose" in out


@pytest.mark.slow
def test_same_seed_same_generated_arch(trained_ws, capsys):
    lo, hi = _range(trained_ws)
    b = str(round(lo + 0.4 * (hi - lo), 3))
    outs = [run(capsys, "generate", "-w", str(trained_ws), "-b", b, "--json")[1] for _ in range(2)]
    assert json.loads(outs[0])["results"][0]["best"]["arch"] == json.loads(outs[1])["results"][0]["best"]["arch"]


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["nan", "inf", "-1", "0", "abc"])
def test_bad_budget_exits_2_and_writes_nothing(trained_ws, capsys, bad):
    rc, out, err = run(capsys, "generate", "--workspace", str(trained_ws), "--budget", bad, "--json")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) <= 2


@pytest.mark.slow
def test_budget_below_the_fastest_exits_1_naming_it_and_above_the_slowest_says_so(trained_ws, capsys):
    lo, hi = _range(trained_ws)
    rc, out, err = run(capsys, "generate", "--workspace", str(trained_ws), "--budget", str(lo / 2))
    assert rc == 1 and out == "" and "fastest network" in err and f"{lo:.4g} ms" in err and "hint:" in err
    rc, out, _ = run(capsys, "generate", "--workspace", str(trained_ws), "--budget", str(hi * 10), "--json")
    r = json.loads(out)["results"][0]
    assert rc == 0 and "above the slowest network" in r["note"] and r["effective_budget_ms"] == pytest.approx(hi)


@pytest.mark.slow
def test_search_and_compare(trained_ws, capsys, tmp_path):
    lo, hi = _range(trained_ws)
    b = round(lo + 0.5 * (hi - lo), 3)
    rc, out, _ = run(capsys, "search", "-w", str(trained_ws), "-b", str(b), "-m", "random", "--queries", "300", "--json")
    assert rc == 0
    r = json.loads(out)
    assert r["accuracy_queries"] == 300 and r["latency_ms"] <= b
    budgets = [b, round(lo + 0.75 * (hi - lo), 3)]
    rc, out, _ = run(capsys, "compare", "-w", str(trained_ws), "--budgets", ",".join(map(str, budgets)),
                     "--methods", "nag,random,evolution", "--queries", "300", "--plot", str(tmp_path), "--json")
    assert rc == 0
    rep = json.loads(out)
    assert {r["method"] for r in rep["rows"]} == {"nag", "random", "evolution"}
    for row in rep["rows"]:
        assert row["latency_ms"] <= row["budget_ms"] and row["accuracy_queries"] <= 300
        if row["method"] == "nag":
            assert row["accuracy_queries"] == 0  # zero-query generation (display queries counted apart)
        n_fit = row["feasible_rate"] * 1000  # a fraction of 1,000 samples of the method
        assert abs(n_fit - round(n_fit)) < 1e-6, row["feasible_rate"]
    # random search proposes uniform archs, so its rate is the uniform rate at that budget; the
    # generator is conditioned on the budget, so its raw samples fit (almost) always
    from nagkit.app.workspace import load_workspace
    from nagkit.space import sample_many

    ws = load_workspace(trained_ws)
    uniform = ws.latency_table.predict_many(ws.space, sample_many(ws.space, 4000, seed=7))
    rows = {(r["method"], r["budget_ms"]): r for r in rep["rows"]}
    for bud in budgets:
        assert rows[("random", bud)]["feasible_rate"] == pytest.approx(float((uniform <= bud).mean()), abs=0.05)
        assert rows[("nag", bud)]["feasible_rate"] == 1.0  # constrained decoding
    assert rows[("random", budgets[0])]["feasible_rate"] < rows[("random", budgets[1])]["feasible_rate"]
    assert rep["summary"]["nag"]["hypervolume"] > 0
    assert (tmp_path / "pareto.png").is_file() and (tmp_path / "latency_hist_nag.png").is_file()


def test_missing_workspace_exits_2(capsys, tmp_path):
    rc, _, err = run(capsys, "generate", "--workspace", "no-such-ws", "--budget", "30")
    assert rc == 2 and "Presets:" in err and "ofa-note10" in err


def test_untrained_workspace_names_the_command(capsys, tmp_path):
    (tmp_path / "nagkit.toml").write_text(tiny_workspace_toml())
    rc, _, err = run(capsys, "generate", "--workspace", str(tmp_path), "--budget", "2")
    assert rc == 2 and "nagkit train --workspace" in err


@pytest.mark.slow
def test_python_api_returns_ranked_candidates_and_counts_queries(trained_ws):
    from nagkit.app.nag import generate
    from nagkit.app.workspace import load_workspace

    lo, hi = _range(trained_ws)
    budgets = [lo + f * (hi - lo) for f in (0.3, 0.5, 0.7)]
    model = load_workspace(trained_ws).nag_model()
    res = generate(trained_ws, budgets, search_queries=12, top=3, model=model, display=False)
    assert [r.budget_ms for r in res] == budgets
    for r in res:
        assert all(c.latency_ms <= r.budget_ms for c in r.candidates)
        assert len({str(c.arch) for c in r.candidates}) == len(r.candidates)  # unique, fallbacks for `build`
        head = [c.accuracy for c in r.candidates if c.accuracy is not None]
        assert head and head == sorted(head, reverse=True)  # chosen by the queried accuracies
        assert 0 < r.selection_queries <= 12 and r.display_queries == 0


def test_search_below_the_fastest_arch_exits_1(capsys, tmp_path):
    (tmp_path / "nagkit.toml").write_text(tiny_workspace_toml())
    rc, out, err = run(capsys, "search", "-w", str(tmp_path), "-b", "0.1", "-m", "random")
    assert rc == 1 and out == "" and "fastest network" in err and "range" in err


def test_d7_a_second_train_of_one_workspace_is_refused_while_one_runs(capsys, tmp_path):
    """Issue 13 D7: two `nagkit train` of one workspace never both report success; the second
    is refused at once (exit 2, one line) and writes nothing."""
    from nagkit.io import exclusive_lock

    (tmp_path / "nagkit.toml").write_text(tiny_workspace_toml())
    (tmp_path / "dataset.jsonl").write_text("")  # the lock is taken before the dataset is read
    with exclusive_lock(tmp_path / ".evaluator.pt.lock", message="held by the first train"):  # the first train
        rc, out, err = run(capsys, "train", "--workspace", str(tmp_path))
    assert rc == 2 and out == "", err
    assert "another `nagkit train`" in err and "wait for it" in err and "Traceback" not in err
    assert not (tmp_path / "evaluator.pt").exists() and not (tmp_path / "generator.pt").exists()
