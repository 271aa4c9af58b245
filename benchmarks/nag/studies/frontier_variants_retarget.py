"""Re-targeting variants of the frontier search (decisions 41, 45): NAG re-targeted between the shipped w1.0 tables against OFA-exact evolution.
Results: frontier_variants-2026-11-29.json ("base" there: the sources and the re-targeted search at 32 parents / 48 per population)."""
import sys, os, json, time, argparse, tempfile, itertools
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "nag")); sys.path.insert(0, str(ROOT))
import numpy as np
os.environ.setdefault("NAGKIT_HOME", tempfile.mkdtemp(prefix="nagkit-home-"))
import bench_retarget as br

VARIANTS = {
    "base": "",
    "rt16": "[frontier.retarget]\nparents = 16\npopulation = 32\n",
    "r40_g12": "[frontier.active]\nbudgets = 12\ngenerations = 12\n",
    "r20_g12_p1": "[frontier.active]\nbudgets = 50\npicks = 1\ngenerations = 12\n",
    "r40_g12_p1": "[frontier.active]\nbudgets = 25\npicks = 1\ngenerations = 12\n",
    # grow*: run at commit d6abafc, where ActiveConfig.grow exists (removed after: not adopted)
    "grow2": "[frontier.retarget]\ngrow = 2\n",
    "grow4": "[frontier.retarget]\ngrow = 4\n",
    "grow4a": "[frontier.retarget]\ngrow = 4\ngrow_share = 1.0\n",
    # lin, mix: ActiveConfig.spacing (decisions 48; "mixed" is now the default)
    "lin": "[frontier.retarget]\nspacing = \"linear\"\n",
    "mix": "[frontier.retarget]\nspacing = \"mixed\"\n",
    # the re-targeted search's reach from the old table's frontier (H200 at 0.77 ms, 2026-11-29)
    "g24": "[frontier.retarget]\ngenerations = 24\n",
    "mc5": "[frontier.retarget]\nmax_changes = 5\n",
    "p64": "[frontier.retarget]\nparents = 64\npopulation = 96\n",
}
TMP = Path(tempfile.mkdtemp(prefix="rt-"))

def job(j):
    import torch
    torch.set_num_threads(1)
    kind = j[0]
    from nagkit.app.nag import train_workspace
    from nagkit.app.workspace import init_workspace, load_workspace
    if kind == "evo":
        return j, br.evolution(j[1], j[2], j[3], TMP / f"evo-{j[1]}")
    if kind == "src":
        _, name, seed = j
        ws = br.make_source_workspace(TMP / f"src-{name}-{seed}", name, seed)
        t0 = time.perf_counter(); rep = train_workspace(ws); s = time.perf_counter() - t0
        out = {"seconds": s, "q": rep["accuracy_queries"]}
        if name != "litert" or True:
            out["generation"] = br.generate_scored(load_workspace(ws.root), br.budgets_for(ws, name))
        return j, out
    _, v, seed, a, b = j
    dest = init_workspace(TMP / f"{v}-{a}-{b}-{seed}", source=TMP / f"src-{a}-{seed}", latency_table=br.table_path(b))
    toml = dest.root / "nagkit.toml"
    txt = toml.read_text()
    assert "[surrogate]" not in txt and "[frontier" not in txt, txt
    toml.write_text(txt + "\n" + VARIANTS[v])
    dest = load_workspace(dest.root)
    t0 = time.perf_counter(); rep = train_workspace(dest); s = time.perf_counter() - t0
    import dataclasses
    out = {}
    for k in (0, 3, 10):
        m = load_workspace(dest.root).nag_model(with_source=False)
        m.inference = dataclasses.replace(m.inference, archive=k)
        sc = dest.open_accuracy_source()
        out[k] = [{"budget_ms": bb, "accuracy_pct": 100 * float(sc.evaluate([m.generate([bb], display=False)[0].best.arch])[0])}
                  for bb in br.budgets_for(dest, b)]
    gen = out[3]
    # best queried arch within each budget (the archive's reach)
    from nagkit.nag.archive import Archive
    arc = load_workspace(dest.root).nag_model(with_source=False).archive
    best = [float(100 * arc.accuracy[arc.latency_ms <= g["budget_ms"]].max()) for g in gen]
    return j, {"seconds": s, "q": rep["accuracy_queries"], "generation": gen, "gen0": out[0], "gen10": out[10], "archive_best": best}

def pool_run(jobs, n):
    import multiprocessing as mp
    res = {}
    with mp.get_context("fork").Pool(n) as p:
        for j, r in p.imap_unordered(job, jobs):
            res[j] = r
            print("done", j, flush=True)
    return res

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--seeds", type=int, default=6); ap.add_argument("--first-seed", type=int, default=0); ap.add_argument("--jobs", type=int, default=15)
    ap.add_argument("--variants", default=",".join(VARIANTS)); ap.add_argument("--scratch", type=int, default=0); ap.add_argument("--out", required=True)
    a = ap.parse_args()
    SEEDS = range(a.first_seed, a.first_seed + a.seeds)
    from nagkit.app.workspace import load_workspace
    budgets = {}
    for t in ("litert", "onnxruntime", "cuda-h200"):
        root = TMP / f"evo-{t}"; root.mkdir()
        (root / "nagkit.toml").write_text(f'name = "evo-{t}"\nlatency_table = "{br.table_path(t)}"\naccuracy = "ofa-predictor:ofa/acc_predictor.pth"\nseed = 0\n\n[space]\npreset = "ofa-mbv3-w1.0"\nresolutions = [224]\n')
        budgets[t] = br.budgets_for(load_workspace(root), t)
    t0 = time.time()
    jobs = [("src", n, s) for n in (("litert", "onnxruntime", "cuda-h200") if a.scratch else ("litert", "onnxruntime")) for s in SEEDS]
    jobs += [("evo", t, b, s) for t in budgets for b in budgets[t] for s in range(3)]
    res = pool_run(jobs, a.jobs)
    jobs2 = [("rt", v, s, x, y) for v in a.variants.split(",") for s in SEEDS for x, y in br.PAIRS]
    res.update(pool_run(jobs2, a.jobs))
    evo = {t: {b: float(np.mean([res[("evo", t, b, s)]["accuracy_pct"] for s in range(3)])) for b in budgets[t]} for t in budgets}
    summ = {}
    for t in (budgets if a.scratch else ()):
        d = np.array([[g["accuracy_pct"] - evo[t][g["budget_ms"]] for g in res[("src", t, s)]["generation"]] for s in SEEDS])
        summ[f"scratch:{t}"] = {"mean": d.mean(0).round(3).tolist(), "worst": d.min(0).round(3).tolist(), "avg": round(float(d.mean()), 3)}
    for v in a.variants.split(","):
        for x, y in br.PAIRS:
            rows = [res[("rt", v, s, x, y)] for s in SEEDS]
            d = np.array([[g["accuracy_pct"] - evo[y][g["budget_ms"]] for g in r["generation"]] for r in rows])
            arcb = np.array([[ab - evo[y][g["budget_ms"]] for ab, g in zip(r["archive_best"], r["generation"])] for r in rows])
            summ[f"{v}:{x}->{y}"] = {"mean": d.mean(0).round(3).tolist(), "worst": d.min(0).round(3).tolist(), "avg": round(float(d.mean()), 3),
                                     "mean3": d[:3].mean(0).round(3).tolist(), "arc_mean": arcb.mean(0).round(3).tolist(),
                                     "secs": round(float(np.mean([r["seconds"] for r in rows])), 1), "newq": [r["q"]["new"] for r in rows]}
    out = {"evo": evo, "summary": summ, "seconds": time.time() - t0, "raw": {str(k): v for k, v in res.items()}}
    Path(a.out).write_text(json.dumps(out, indent=1))
    for k, v in summ.items():
        print(k, json.dumps(v))

if __name__ == "__main__":
    main()
