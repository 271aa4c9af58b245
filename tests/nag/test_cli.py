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


@pytest.mark.slow
def test_dataset_train_generate(trained_ws, capsys):
    ws = trained_ws
    assert (ws / "dataset.jsonl").is_file() and (ws / "generator.pt").is_file() and (ws / "generator.json").is_file()
    meta = json.loads((ws / "generator.json").read_text())
    lo, hi = meta["grid"]["values"][0], meta["grid"]["values"][-1]
    mid = round((lo + hi) / 2, 3)
    rc, out, _ = run(capsys, "generate", "--workspace", str(ws), "--budget", str(mid), "--budget", str(hi), "--json")
    assert rc == 0
    res = json.loads(out)["results"]
    assert [r["budget_ms"] for r in res] == [mid, hi]
    for r in res:
        best = r["best"]
        assert best["latency_ms"] <= r["budget_ms"]
        assert 0 < best["accuracy"] < 1 and r["accuracy_source"] == "synthetic"
        assert best["ofa"]["d"] and best["arch"].startswith("r")
    rc, out, _ = run(capsys, "generate", "--workspace", str(ws), "--budget", str(mid))
    assert rc == 0 and "accuracy" in out and "(synthetic)" in out and "latency table" in out


@pytest.mark.slow
def test_same_seed_same_generated_arch(trained_ws, capsys):
    meta = json.loads((trained_ws / "generator.json").read_text())
    b = str(meta["grid"]["values"][2])
    outs = [run(capsys, "generate", "-w", str(trained_ws), "-b", b, "--json")[1] for _ in range(2)]
    assert json.loads(outs[0])["results"][0]["best"]["arch"] == json.loads(outs[1])["results"][0]["best"]["arch"]


@pytest.mark.slow
def test_out_of_range_budget_exits_2_with_the_range(trained_ws, capsys):
    rc, out, err = run(capsys, "generate", "--workspace", str(trained_ws), "--budget", "0.01")
    assert rc == 2 and out == ""
    assert "outside the feasible range" in err and " ms" in err and "hint:" in err


@pytest.mark.slow
def test_search_and_compare(trained_ws, capsys, tmp_path):
    meta = json.loads((trained_ws / "generator.json").read_text())
    b = meta["grid"]["values"][2]
    rc, out, _ = run(capsys, "search", "-w", str(trained_ws), "-b", str(b), "-m", "random", "--queries", "300", "--json")
    assert rc == 0
    r = json.loads(out)
    assert r["accuracy_queries"] == 300 and r["latency_ms"] <= b
    budgets = [b, meta["grid"]["values"][3]]
    rc, out, _ = run(capsys, "compare", "-w", str(trained_ws), "--budgets", ",".join(map(str, budgets)),
                     "--methods", "nag,random,evolution", "--queries", "300", "--plot", str(tmp_path), "--json")
    assert rc == 0
    rep = json.loads(out)
    assert {r["method"] for r in rep["rows"]} == {"nag", "random", "evolution"}
    for row in rep["rows"]:
        assert row["latency_ms"] <= row["budget_ms"] and row["accuracy_queries"] <= 300
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
        assert rows[("nag", bud)]["feasible_rate"] >= 0.9
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
    from nagkit.nag.infer import NagModel, generate

    meta = json.loads((trained_ws / "generator.json").read_text())
    budgets = meta["grid"]["values"][1:4]
    model = NagModel.from_workspace(trained_ws)
    res = generate(trained_ws, budgets, rerank=5, top=3, model=model)
    assert [r.budget_ms for r in res] == budgets
    for r in res:
        assert all(c.latency_ms <= r.budget_ms for c in r.candidates)
        assert len({str(c.arch) for c in r.candidates}) == len(r.candidates)  # unique, fallbacks for `build`
        head = [c.accuracy for c in r.candidates[: min(5, len(r.candidates))]]
        assert head == sorted(head, reverse=True)  # re-ranked by the accuracy source
        assert r.queries == min(5, len(r.candidates))
        assert 0 < r.feasible_rate <= 1


def test_search_below_the_fastest_arch_exits_2(capsys, tmp_path):
    (tmp_path / "nagkit.toml").write_text(tiny_workspace_toml())
    rc, out, err = run(capsys, "search", "-w", str(tmp_path), "-b", "0.1", "-m", "random")
    assert rc == 2 and out == "" and "fastest architecture" in err and "feasible range" in err
