"""From-scratch NAG v3 variants of the frontier search on the shipped workspaces against OFA-exact evolution (docs/decisions.md 45).
Run before decisions 45 ("base" was then 16 parents / 32 per population; "par32" is now the default). Results: frontier_variants-2026-11-29.json."""
import sys, os, json, time, argparse, dataclasses, tempfile, pathlib
ROOT = pathlib.Path(__file__).resolve().parents[3]; sys.path.insert(0, str(ROOT))
import numpy as np
B = {"ofa-note10": [15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0], "ofa-cpu-w1.0": [5.0, 10.0, 20.0, 40.0, 80.0]}
REF = json.load(open(pathlib.Path(__file__).with_name("evo_ref.json")))  # OFA-exact evolution, 3 seeds per budget
VARIANTS = {"base": [], "g12": ["frontier.active.generations=12"], "g9": ["frontier.active.generations=9"],
            "mc5": ["frontier.active.max_changes=5"], "par32": ["frontier.active.parents=32", "frontier.active.population=48"],
            "b200p1": ["frontier.active.budgets=200", "frontier.active.picks=1"], "cx5": ["frontier.active.crossover=0.5"],
            "ch192": ["frontier.active.children=192"], "b50": ["frontier.active.budgets=50"],
            # grown children (the 60 ms tail): run at commit d6abafc, where ActiveConfig.grow exists (removed after: not adopted)
            "grow2": ["frontier.active.grow=2"], "grow4": ["frontier.active.grow=4"],
            "grow4a": ["frontier.active.grow=4", "frontier.active.grow_share=1.0"],
            # the rounds' budgets in equal slices of latency, or half and half: ActiveConfig.spacing (decisions 48; "mixed" is now the default)
            "lin": ['frontier.active.spacing="linear"'], "mix": ['frontier.active.spacing="mixed"']}

def run(j):
    import torch; torch.set_num_threads(1)
    wsn, v, seed = j
    from nagkit.app.workspace import load_workspace
    from nagkit.data.dataset import collect
    from nagkit.nag.train import train_models
    from nagkit.nag.infer import NagModel
    ws = load_workspace(wsn)
    cfgs = {"surrogate": dataclasses.replace(ws.surrogate_config, seed=seed), "frontier": ws.frontier_config,
            "generator": dataclasses.replace(ws.generator_config, seed=seed), "evaluator": dataclasses.replace(ws.evaluator_config, seed=seed)}
    for kv in VARIANTS[v]:
        k, val = kv.split("="); sec, *path = k.split("."); val = json.loads(val)
        if len(path) == 2:
            cfgs[sec] = dataclasses.replace(cfgs[sec], **{path[0]: dataclasses.replace(getattr(cfgs[sec], path[0]), **{path[1]: val})})
        else:
            cfgs[sec] = dataclasses.replace(cfgs[sec], **{path[0]: val})
    src = ws.open_accuracy_source()
    d = pathlib.Path(tempfile.mkdtemp())
    ds = collect(d / "ds.jsonl", space=ws.space, table=ws.latency_table, source=src, n=501, seed=seed, table_prov=ws.latency_table_provenance())
    t = time.perf_counter()
    tr = train_models(ws.space, ws.latency_table, ds.archs, ds.accuracy, budgets=ws.budgets, evaluator_cfg=cfgs["evaluator"],
                      generator_cfg=cfgs["generator"], frontier_cfg=cfgs["frontier"], surrogate_cfg=cfgs["surrogate"], source=src)
    secs = time.perf_counter() - t
    m = NagModel(ws.space, ws.latency_table, tr.evaluator, tr.generator, None, ws.inference, tr.archive)
    sc = ws.open_accuracy_source()
    res = {"secs": secs, "q": src.queries}
    for k in (3,):
        m.inference = dataclasses.replace(ws.inference, archive=k)
        gen = []
        for b in B[wsn]:
            r = m.generate([b], display=False)[0]
            gen.append(100 * sc.evaluate([r.best.arch])[0] - np.mean(REF[f"{wsn}:{b}"]))
        res[f"gen{k}"] = gen
    res["gen"] = res["gen3"]
    return j, res

if __name__ == "__main__":
    ap = argparse.ArgumentParser(); ap.add_argument("--seeds", type=int, default=6); ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--variants", default="base,g12"); ap.add_argument("--out", required=True); a = ap.parse_args()
    import multiprocessing as mp
    jobs = [(w, v, s) for w in B for v in a.variants.split(",") for s in range(a.seeds)]
    res = {}
    with mp.get_context("fork").Pool(a.jobs) as p:
        for j, r in p.imap_unordered(run, jobs):
            res[j] = r
    summ = {}
    for w in B:
        for v in a.variants.split(","):
          for gk in ("gen3",):
            d = np.array([res[(w, v, s)][gk] for s in range(a.seeds)])
            summ[f"{v}:{gk}:{w}"] = {"mean": d.mean(0).round(3).tolist(), "worst": d.min(0).round(3).tolist(), "avg": round(float(d.mean()), 3),
                                "mean3": d[:3].mean(0).round(3).tolist(), "worst3": d[:3].min(0).round(3).tolist(),
                                "secs": round(float(np.mean([res[(w, v, s)]["secs"] for s in range(a.seeds)])), 1), "q": res[(w, v, 0)]["q"]}
            print(f"{v}:{gk}:{w}", json.dumps(summ[f"{v}:{gk}:{w}"]), flush=True)
    import itertools
    for v in a.variants.split(","):
        ok = n = 0
        for sub in itertools.combinations(range(a.seeds), 3):
            n += 1; good = True
            for w in B:
                x = np.array([res[(w, v, s)]["gen3"] for s in sub])
                good &= bool((x.mean(0) >= -0.10).all() and x.min() >= -0.25)
            ok += good
        print(f"{v}: 3-seed subsets passing both workspaces {ok}/{n}", flush=True)
    pathlib.Path(a.out).write_text(json.dumps({"summary": summ, "raw": {str(k): v for k, v in res.items()}}, indent=1))
