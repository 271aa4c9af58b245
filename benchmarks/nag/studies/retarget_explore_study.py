"""Study (2026-11-29, decisions 53): a re-targeted search's first rounds rank their populations by
capacity (log MACs, or log parameters) instead of the surrogate, so that they query the most
capable archs within each budget on the new table. Source: ofa-cpu-w1.0-like workspaces on the
LiteRT table (seeds as given), re-targeted to the H200 CUDA and ONNX Runtime tables (1,000 new
queries each), zero-query generation against OFA-exact evolution (retarget_variants' "evo").
Run at ffa35f6, before decisions 53 put "r4_macs" in the product ([frontier.retarget] explore = 4):
the rule is monkeypatched here. Since then "base" needs `explore = 0` in [frontier.retarget].

    .venv/bin/python benchmarks/nag/studies/retarget_explore_study.py --seeds 0,...,9 --variants base,r4_macs,r8_params --out F.json
"""
import sys, os, json, time, tempfile, argparse
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]; sys.path.insert(0, str(ROOT / "benchmarks/nag")); sys.path.insert(0, str(ROOT))
os.environ.setdefault("NAGKIT_HOME", tempfile.mkdtemp(prefix="nagkit-home-"))
import numpy as np
import bench_retarget as br
EVO = json.load(open(ROOT / "benchmarks/nag/studies/retarget_variants-2-core-2026-11-29.json"))["evo"]
TMP = Path(tempfile.mkdtemp(prefix="ex-"))
PAIRS = [("litert", "cuda-h200"), ("litert", "onnxruntime")]

def patch(rounds, key):
    import nagkit.nag.frontier as F
    from nagkit.space.resources import SlotResources
    orig_gen = F.ActiveSearch._generation
    orig_par = F.ActiveSearch._parents
    def cap_score(self, dec):
        if not hasattr(self, "_capres"):
            self._capres = SlotResources(self.space)
        return np.log(self._capres.per_row(key, dec))
    def _generation(self, pop, budgets, limits):
        if self.rounds >= rounds:
            return orig_gen(self, pop, budgets, limits)
        sp = self.surrogate.predict
        self.surrogate.predict = lambda dec, recall=True: cap_score(self, dec)
        try:
            return orig_gen(self, pop, budgets, limits)
        finally:
            del self.surrogate.predict
    def _parents(self, budgets, limits):
        pop = orig_par(self, budgets, limits)
        if self.rounds < rounds:
            pop.accuracy = cap_score(self, pop.dec)
        return pop
    F.ActiveSearch._generation = _generation
    F.ActiveSearch._parents = _parents

def job(j):
    import torch; torch.set_num_threads(1)
    from nagkit.app.nag import train_workspace
    from nagkit.app.workspace import init_workspace, load_workspace
    kind, seed = j[0], j[1]
    if kind == "src":
        ws = br.make_source_workspace(TMP / f"src-{seed}", "litert", seed); train_workspace(ws); return j, None
    _, seed, v = j
    if v == "wide1":  # explore rounds: 24 budgets x 1 pick (same 24 queries a round)
        import dataclasses as dc
        import nagkit.nag.frontier as F
        from nagkit.nag.guided import stratified
        orig_ask = F.ActiveSearch.ask
        def ask(self):
            if self.rounds < self.cfg.explore:
                cfg0, draw0 = self.cfg, self.draw
                self.cfg = dc.replace(cfg0, budgets=2 * cfg0.budgets, picks=1)
                self.draw = stratified(self.latency.fastest_ms, self.latency.slowest_ms, self.cfg.budgets, self.cfg.spacing)
                try:
                    return orig_ask(self)
                finally:
                    self.cfg, self.draw = cfg0, draw0
            return orig_ask(self)
        F.ActiveSearch.ask = ask
    elif v.startswith("spread"):
        import nagkit.nag.frontier as F
        every = int(v[6:])
        def _fitness(self, dec):
            if self.rounds % every == 0 and self.rounds < 4 * every:
                if not hasattr(self, "_capres"):
                    from nagkit.space.resources import SlotResources
                    self._capres = SlotResources(self.space)
                return np.log(self._capres.per_row("macs", dec))
            return self.surrogate.predict(dec)
        F.ActiveSearch._fitness = _fitness
    elif v != "base":
        r, key = v.split("_"); patch(int(r[1:]), key)
    out = {}
    for a, b in PAIRS:
        dest = init_workspace(TMP / f"{v}-{b}-{seed}", source=TMP / f"src-{seed}", latency_table=br.table_path(b))
        t0 = time.perf_counter(); train_workspace(dest); s = time.perf_counter() - t0
        rows = br.generate_scored(load_workspace(dest.root), br.budgets_for(dest, b))
        out[b] = [r["accuracy_pct"] - EVO[b][str(r["budget_ms"])] for r in rows]
    return j, out

if __name__ == "__main__":
    ap = argparse.ArgumentParser(); ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9")
    ap.add_argument("--variants", default="base,r4_macs"); ap.add_argument("--jobs", type=int, default=2); ap.add_argument("--out")
    a = ap.parse_args(); seeds = [int(s) for s in a.seeds.split(",")]; vs = a.variants.split(",")
    import multiprocessing as mp
    res = {}
    with mp.get_context("fork").Pool(a.jobs, maxtasksperchild=1) as p:
        list(p.imap_unordered(job, [("src", s) for s in seeds]))
        for j, o in p.imap_unordered(job, [("rt", s, v) for s in seeds for v in vs]):
            res[f"{j[2]}:{j[1]}"] = o
            print(j, {k: np.round(x, 2).tolist() for k, x in o.items()}, flush=True)
    from itertools import combinations
    summ = {}
    for v in vs:
        for _, b in PAIRS:
            M = np.array([res[f"{v}:{s}"][b] for s in seeds])
            print(v, b, "mean", M.mean(0).round(3).tolist(), "worst", M.min(0).round(3).tolist())
        ok = 0; tot = 0
        for c in combinations(seeds, 3):
            tot += 1
            good = True
            for _, b in PAIRS:
                M = np.array([res[f"{v}:{s}"][b] for s in c])
                good &= bool((M.mean(0) >= -0.10).all() and (M.min() >= -0.25))
            ok += good
        summ[v] = f"{ok}/{tot}"
        print(v, "subsets meeting the point on both pairs", summ[v], flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"res": res, "subsets": summ, "seeds": seeds}, indent=1))
