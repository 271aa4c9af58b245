"""A study, not a setting (2026-11-29): the re-targeted search drawing half its budgets where the
archs it knows on the new table are sparse (linear slices weighted by 1/sqrt(1 + archs known in
the slice), recomputed every round), half as now (mixed slices). Re-uses the source workspaces
and evolution of a frontier_variants_retarget.py run (same seeds, same budgets):

    .venv/bin/python benchmarks/nag/studies/retarget_density_study.py --src /tmp/rt-XXXX --seeds 0-9 \
        --evo studies/retarget_variants-2-core-2026-11-29.json --out OUT.json
"""
import argparse, json, sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import frontier_variants_retarget as fv  # noqa: E402

from nagkit.nag import frontier  # noqa: E402
from nagkit.nag.config import RetargetConfig  # noqa: E402
from nagkit.nag.guided import stratified  # noqa: E402

_init = frontier.ActiveSearch.__init__


def _patched(self, space, latency, cfg, *a, **k):
    _init(self, space, latency, cfg, *a, **k)
    if not isinstance(cfg, RetargetConfig):
        return
    lo, hi, n = latency.fastest_ms, latency.slowest_ms, cfg.budgets
    half = stratified(lo, hi, n - n // 2, cfg.spacing)
    edges = np.linspace(lo, hi, n + 1)

    def draw(rng):
        counts = np.histogram(self.known.latency, edges)[0]
        w = 1.0 / np.sqrt(1.0 + counts)
        idx = rng.choice(n, size=n // 2, p=w / w.sum())
        sparse = edges[idx] + rng.random(n // 2) * (edges[idx + 1] - edges[idx])
        return np.concatenate([half(rng), sparse])

    self.draw = draw


frontier.ActiveSearch.__init__ = _patched
fv.VARIANTS["dens"] = ""

ap = argparse.ArgumentParser()
ap.add_argument("--src", required=True); ap.add_argument("--seeds", required=True); ap.add_argument("--evo", required=True)
ap.add_argument("--jobs", type=int, default=2); ap.add_argument("--out", required=True)
a = ap.parse_args()
s0, s1 = (int(x) for x in a.seeds.split("-"))
fv.TMP = Path(a.src)
evo = json.load(open(a.evo))["evo"]
jobs = [("rt", "dens", s, x, y) for s in range(s0, s1 + 1) for x, y in fv.br.PAIRS]
res = fv.pool_run(jobs, a.jobs)
summ = {}
for x, y in fv.br.PAIRS:
    rows = [res[("rt", "dens", s, x, y)] for s in range(s0, s1 + 1)]
    d = np.array([[g["accuracy_pct"] - evo[y][str(g["budget_ms"])] for g in r["generation"]] for r in rows])
    arc = np.array([[ab - evo[y][str(g["budget_ms"])] for ab, g in zip(r["archive_best"], r["generation"])] for r in rows])
    summ[f"dens:{x}->{y}"] = {"mean": d.mean(0).round(3).tolist(), "worst": d.min(0).round(3).tolist(),
                              "arc_mean": arc.mean(0).round(3).tolist(), "newq": [r["q"]["new"] for r in rows]}
    print(f"dens:{x}->{y}", json.dumps(summ[f"dens:{x}->{y}"]))
Path(a.out).write_text(json.dumps({"evo": evo, "summary": summ, "raw": {str(k): v for k, v in res.items()}}, indent=1))
