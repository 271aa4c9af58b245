"""Issue 34 study: a share of the frontier search's budgets carry a parameter limit.
Per (variant, seed): training from scratch on ofa-note10 (5,010 queries), then zero-query
generation at the 7 latency budgets (vs evo_ref) and at the 6 parameter points (vs quality.json's evolution).
ofa-cpu-w1.0: latency budgets and peak points. "rich": the same choice with an archive that also
holds the (latency, parameters) frontier layers of every queried arch (nagkit.nag.archive.limited_layers).
Run at commit b392832 (ActiveConfig.limited, before decisions 52 made it an option); the "_q20k"
and "_q10k" variants (20,040 and 10,020 queries) give limited_search_20k-2-core-2026-11-29.json. Since decisions 52 the
saved archive of a limited training is the "rich" one, so "lim" equals "rich" there (checked on
seed 0 of lim50_q20k: the same six figures).
Results: limited_search-2-core-2026-11-29.json (2-core AMD EPYC VM, --jobs 2, seeds 0-2)."""
import sys, os, json, time, argparse, dataclasses, tempfile, pathlib
ROOT = pathlib.Path(__file__).resolve().parents[3]; sys.path.insert(0, str(ROOT))
import numpy as np
B = {"ofa-note10": [15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0], "ofa-cpu-w1.0": [5.0, 10.0, 20.0, 40.0, 80.0]}
REF = json.load(open(ROOT / "benchmarks/nag/studies/evo_ref.json"))
Q = json.load(open(ROOT / "benchmarks/constraints/results/quality.json"))
PTS = {}
for w, s in Q["summary"].items():
    key = s["limit"]
    PTS[w] = [(p["budget_ms"], key, p[key], p["evolution_mean_pct"]) for p in s["points"]]
VARIANTS = {"base": [], "lim25": ["frontier.active.limited=0.25"], "lim50": ["frontier.active.limited=0.5"],
            "lim10": ["frontier.active.limited=0.1"],
            "base_q20k": ["frontier.total_queries=20040"], "lim50_q20k": ["frontier.active.limited=0.5", "frontier.total_queries=20040"],
            "lim50_q10k": ["frontier.active.limited=0.5", "frontier.total_queries=10020"],
            "lim25_q10k": ["frontier.active.limited=0.25", "frontier.total_queries=10020"]}

def run(j):
    import torch; torch.set_num_threads(1)
    wsn, v, seed = j
    from nagkit.app.workspace import load_workspace
    from nagkit.data.dataset import collect
    from nagkit.nag.train import train_models
    from nagkit.nag.infer import NagModel
    from nagkit.nag.constraints import Limits
    ws = load_workspace(wsn)
    cfgs = {"surrogate": dataclasses.replace(ws.surrogate_config, seed=seed), "frontier": ws.frontier_config,
            "generator": dataclasses.replace(ws.generator_config, seed=seed), "evaluator": dataclasses.replace(ws.evaluator_config, seed=seed)}
    for kv in VARIANTS[v]:
        k, val = kv.split("="); sec, *path = k.split("."); val = json.loads(val)
        if len(path) == 2:
            cfgs[sec] = dataclasses.replace(cfgs[sec], **{path[0]: dataclasses.replace(getattr(cfgs[sec], path[0]), **{path[1]: val})})
        else:
            cfgs[sec] = dataclasses.replace(cfgs[sec], **{path[0]: val})
    import nagkit.nag.train as T
    from nagkit.nag.archive import Archive, limited_layers, frontier_layers
    from nagkit.space.resources import SlotResources
    cap = {}
    orig = Archive.from_decisions
    def grab(dec, lat, acc, k, params=None):
        cap["known"] = (dec, np.asarray(lat), np.asarray(acc))
        return orig(dec, lat, acc, k, params=params)
    T.Archive.from_decisions = staticmethod(grab)
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
    res["gen"] = [100 * sc.evaluate([m.generate([b], display=False)[0].best.arch])[0] - np.mean(REF[f"{wsn}:{b}"]) for b in B[wsn]]
    dec, lat, acc = cap["known"]
    par = SlotResources(ws.space).per_row("params", dec)
    keep = np.union1d(frontier_layers(lat, acc, 3), limited_layers(lat, par, acc, 3))
    rich = Archive(dec.select(keep), lat[keep], acc[keep])
    res["rows"] = [len(tr.archive), len(rich), len(lat)]
    res["lim"] = [100 * sc.evaluate([m.generate([b], display=False, limits=Limits(**{key: val}))[0].best.arch])[0] - evo
                  for b, key, val, evo in PTS[wsn]]
    m.archive = rich
    res["rich"] = [100 * sc.evaluate([m.generate([b], display=False, limits=Limits(**{key: val}))[0].best.arch])[0] - evo
                  for b, key, val, evo in PTS[wsn]]
    res["gen_rich"] = [100 * sc.evaluate([m.generate([b], display=False)[0].best.arch])[0] - np.mean(REF[f"{wsn}:{b}"]) for b in B[wsn]]
    return j, res

if __name__ == "__main__":
    ap = argparse.ArgumentParser(); ap.add_argument("--seeds", default="0,1,2"); ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--ws", default="ofa-note10,ofa-cpu-w1.0")
    ap.add_argument("--variants", default="base,lim25"); ap.add_argument("--out", required=True); a = ap.parse_args()
    import multiprocessing as mp
    seeds = [int(s) for s in a.seeds.split(",")]
    wss = a.ws.split(",")
    jobs = [(w, v, s) for w in wss for v in a.variants.split(",") for s in seeds]
    res = {}
    with mp.get_context("fork").Pool(a.jobs) as p:
        for j, r in p.imap_unordered(run, jobs):
            res[j] = r
            print(j, round(r["secs"], 1), np.round(r["gen"], 2).tolist(), np.round(r["lim"], 2).tolist(), np.round(r["rich"], 2).tolist(), r["rows"], flush=True)
    for w in wss:
        for v in a.variants.split(","):
            g = np.array([res[(w, v, s)]["gen"] for s in seeds]); l = np.array([res[(w, v, s)]["lim"] for s in seeds])
            rr = np.array([res[(w, v, s)]["rich"] for s in seeds])
            print(f"{w} {v}: rich mean {rr.mean(0).round(2).tolist()} worst {rr.min(0).round(2).tolist()}")
            print(f"{w} {v}: gen mean {g.mean(0).round(2).tolist()} worst {g.min(0).round(2).tolist()} | "
                  f"lim mean {l.mean(0).round(2).tolist()} | secs {np.mean([res[(w, v, s)]['secs'] for s in seeds]):.1f}", flush=True)
    pathlib.Path(a.out).write_text(json.dumps({str(k): v for k, v in res.items()}, indent=1))
