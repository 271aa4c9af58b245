"""`nagkit generate` on the default workspace, end to end: a budget's result depends only on
the workspace, the budget and the seed (not on the other budgets of the call), and choosing and
showing it queries no accuracy (the supernet source is expensive here: only its cache is read)."""

from __future__ import annotations

import json

from tests.cli.helpers import run_cli


def test_a_budgets_result_does_not_depend_on_the_other_budgets(cli_env, tmp_path):
    one = run_cli(["generate", "--budget", "1.5", "--json"], env=cli_env, cwd=tmp_path)
    two = run_cli(["generate", "--budget", "3", "--budget", "1.5", "--seed", "0", "--json"], env=cli_env, cwd=tmp_path)
    assert one.code == 0 and two.code == 0, one.err + two.err
    a = json.loads(one.out)["results"][0]
    b = next(r for r in json.loads(two.out)["results"] if r["budget_ms"] == 1.5)
    assert a["best"]["arch"] == b["best"]["arch"]
    for r in (a, b):
        assert r["selection_queries"] == 0 and r["display_queries"] == 0
    other_seed = run_cli(["generate", "--budget", "1.5", "--seed", "1", "--json"], env=cli_env, cwd=tmp_path)
    assert json.loads(other_seed.out)["results"][0]["best"]["latency_ms"] <= 1.5
