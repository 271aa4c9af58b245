"""Study (2026-11-29, issue 33; not adopted): where should a re-targeted search's first rounds go?
Decisions 53 (the product: the first 4 rounds rank by log MACs) against other ways to reach what
the new table makes cheap. Source: ofa-cpu-w1.0-like workspaces on the LiteRT table, re-targeted
to the H200 CUDA and ONNX Runtime tables (1,000 new queries each), zero-query generation against
OFA-exact evolution (retarget_variants' "evo"). Variants, monkeypatched on the product at 177b8e6:

- base: the product (decisions 53);
- rp4: the first 4 rounds start each budget's population from random archs brought within the
  budget (repaired), ranked by the surrogate, no MACs;
- macs_rp4: the product's 4 MACs rounds, then 4 rounds from random archs;
- rp_every4: the product, then every 4th round from random archs;
- nov<k>[_r<n>]: the first n (4) rounds rank by surrogate + k/100 x novelty (the fewest genes in
  which a candidate differs from any known arch), no MACs;
- macsnov<k>: the product's 4 MACs rounds, then 4 rounds by surrogate + k/100 x novelty;
- gen24, mc5, pop96: the product with the re-targeted search's generations 12 -> 24, max_changes
  3 -> 5, or population 48 -> 96 (every round).

    STUDY_ROOT=<checkout> .venv/bin/python benchmarks/nag/studies/retarget_lineage_study.py --seeds 0,...,9 --variants base,rp4 --out F.json
"""
import sys, os, json, time, tempfile, argparse
from pathlib import Path
ROOT = Path(os.environ["STUDY_ROOT"]); sys.path.insert(0, str(ROOT / "benchmarks/nag")); sys.path.insert(0, str(ROOT))
os.environ.setdefault("NAGKIT_HOME", tempfile.mkdtemp(prefix="nagkit-home-"))
import numpy as np
import bench_retarget as br
from nagkit.space import sampling as ops
EVO = json.load(open(ROOT / "benchmarks/nag/studies/retarget_variants-2-core-2026-11-29.json"))["evo"]
TMP = Path(tempfile.mkdtemp(prefix="ex-"))
PAIRS = [("litert", "cuda-h200"), ("litert", "onnxruntime")]

def random_parents(self, budgets, limits):
    """Per budget, ``parents`` random archs of the space brought down within it (repair), scored by
    the surrogate: lineages that do not start from the carried archive."""
    from nagkit.space.decisions import Pool, concat
    rng, sp, n = self.rng, self.space, self.cfg.parents
    rows, groups, lats = [], [], []
    for g, b in enumerate(budgets):
        dec = ops.random_decisions(sp, 8 * n, rng)
        lat = self.latency(dec)
        lat = ops.repair_down(sp, dec, lat, np.full(len(lat), b), self.latency, rng, 40)
        ok = np.flatnonzero(lat <= b)[:n]
        rows.append(dec.select(ok)); groups.append(np.full(len(ok), g)); lats.append(lat[ok])
    pop = Pool(concat(*rows), np.concatenate(groups), np.concatenate(lats))
    pop.accuracy = self._fitness(pop.dec)
    return pop

def novelty(self, dec):
    """Per row, the fewest genes (arch keys: inactive slots ignored) in which it differs from any known arch."""
    from nagkit.space.decisions import arch_keys
    if not hasattr(self, "_kn") or self._kn[0] != len(self.known):
        self._kn = (len(self.known), arch_keys(self.space, self.known.dec).astype(np.int8))
    K = self._kn[1]; Q = arch_keys(self.space, dec).astype(np.int8)
    out = np.full(len(Q), 10 ** 6)
    for i in range(0, len(K), 1024):
        d = (Q[:, None, :] != K[None, i:i + 1024, :]).sum(2)
        out = np.minimum(out, d.min(1))
    return out

def install(v):
    import nagkit.nag.frontier as F
    orig_par, orig_fit = F.ActiveSearch._parents, F.ActiveSearch._fitness
    if v == "base":
        return
    knobs = {"gen24": {"generations": 24}, "mc5": {"max_changes": 5}, "pop96": {"population": 96}}
    if v in knobs:  # the re-targeted search's config with one knob changed (all rounds)
        import dataclasses as dc
        orig_init = F.ActiveSearch.__init__
        def __init__(self, space, latency, cfg, *a, **k):
            if cfg.explore > 0:
                cfg = dc.replace(cfg, **knobs[v])
            orig_init(self, space, latency, cfg, *a, **k)
        F.ActiveSearch.__init__ = __init__
        return
    elif v == "rp4":  # first 4 rounds: random parents, surrogate ranking (no MACs)
        def _fitness(self, dec):
            return self.surrogate.predict(dec)
        def _parents(self, budgets, limits):
            return random_parents(self, budgets, limits) if self.rounds < 4 else orig_par(self, budgets, limits)
        F.ActiveSearch._fitness = _fitness; F.ActiveSearch._parents = _parents
    elif v == "macs_rp4":  # the product's 4 MACs rounds, then 4 rounds from random parents
        def _parents(self, budgets, limits):
            return random_parents(self, budgets, limits) if 4 <= self.rounds < 8 else orig_par(self, budgets, limits)
        F.ActiveSearch._parents = _parents
    elif v == "rp_every4":  # the product, then every 4th round from random parents
        def _parents(self, budgets, limits):
            if self.rounds >= 4 and self.rounds % 4 == 0:
                return random_parents(self, budgets, limits)
            return orig_par(self, budgets, limits)
        F.ActiveSearch._parents = _parents
    elif v.startswith("nov"):  # nov<kappa x 100>[_r<rounds>]: surrogate + kappa x novelty in the first rounds, no MACs
        parts = v[3:].split("_r"); kappa = int(parts[0]) / 100; rounds = int(parts[1]) if len(parts) > 1 else 4
        def _fitness(self, dec):
            p = self.surrogate.predict(dec)
            if self.rounds < rounds:
                p = p + kappa * novelty(self, dec)
            return p
        F.ActiveSearch._fitness = _fitness
    elif v.startswith("macsnov"):  # the product's MACs rounds, then nov rounds
        kappa = int(v[7:]) / 100
        def _fitness(self, dec):
            if self.rounds < 4:
                return orig_fit(self, dec)
            p = self.surrogate.predict(dec)
            if self.rounds < 8:
                p = p + kappa * novelty(self, dec)
            return p
        F.ActiveSearch._fitness = _fitness
    else:
        raise SystemExit(f"unknown variant {v}")

def job(j):
    import torch; torch.set_num_threads(1)
    from nagkit.app.nag import train_workspace
    from nagkit.app.workspace import init_workspace, load_workspace
    kind, seed = j[0], j[1]
    if kind == "src":
        ws = br.make_source_workspace(TMP / f"src-{seed}", "litert", seed); train_workspace(ws); return j, None
    _, seed, v = j
    install(v)
    out = {}
    for a, b in PAIRS:
        dest = init_workspace(TMP / f"{v}-{b}-{seed}", source=TMP / f"src-{seed}", latency_table=br.table_path(b))
        train_workspace(dest)
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
            if a.out:
                with open(a.out + "l", "a") as fh:
                    fh.write(json.dumps({"key": f"{j[2]}:{j[1]}", "res": o}) + "\n")
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
