"""A study, no retraining (2026-11-29): the selection at generation. Among the generator's samples
and the archive's 3 best archs within B, pick by the evaluator's score, where archs whose accuracy
is known (queried in training) keep it and estimated ones lose ``delta`` points (delta 0: the
shipped rule). Runs on the workspaces that frontier_variants_retarget.py left in its temporary
folders (seeds 0-9 and 10-19: the "base" re-targeted trainings and their sources):

    .venv/bin/python benchmarks/nag/studies/retarget_selection_study.py DIR_SEEDS_0_9 DIR_SEEDS_10_19 OUT.json
"""
import sys, json, os, tempfile
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / 'benchmarks/nag'))
os.environ.setdefault("NAGKIT_HOME", tempfile.mkdtemp())
import numpy as np, torch
torch.set_num_threads(1)
import bench_retarget as br
from nagkit.app.workspace import load_workspace
from nagkit.nag.generator import sample_archs
from nagkit.nag.infer import budget_seed
from nagkit.space.decisions import concat, dedupe
evo = json.load(open(ROOT / 'benchmarks/nag/studies/retarget_variants-2-core-2026-11-29.json'))['evo']
DELTAS = [0.0, 0.1, 0.2, 0.3, 0.5, 9.0]
def picks(root, table):
    ws = load_workspace(root); m = ws.nag_model(with_source=False); src = ws.open_accuracy_source()
    out = {d: [] for d in DELTAS}
    for b in br.budgets_for(ws, table):
        s = budget_seed(0, b)
        dec, _ = sample_archs(m.generator, [b], m.inference.samples + 1, s, temperature=m.inference.temperature, greedy=True)
        known = m._known_candidates(b, None)
        if len(known): dec = concat(dec, known)
        lat = m.latency(dec); keep = dedupe(m.space, dec); keep = keep[lat[keep] <= b * (1 + 1e-12)]
        dec, lat = dec.select(keep), lat[keep]
        with torch.no_grad():
            x = m.evaluator.features(dec, lat)
            sc = m.evaluator.score(x, torch.full((len(dec),), float(b))).numpy()
            isknown = ~torch.isnan(x[:, -1]).numpy()
        archs = dec.to_archs(m.space)
        for d in DELTAS:
            i = int(np.argmax(np.where(isknown, sc, sc - d)))
            out[d].append(100 * float(src.evaluate([archs[i]])[0]) - evo[table][str(b)])
    return out
res = {}
for base, seeds in ((sys.argv[1], range(10)), (sys.argv[2], range(10, 20))):
    for s in seeds:
        for a, t in br.PAIRS:
            res[(f'rt {a}->{t}', s)] = picks(f'{base}/base-{a}-{t}-{s}', t)
        for t in ('litert', 'onnxruntime'):
            res[(f'src {t}', s)] = picks(f'{base}/src-{t}-{s}', t)
summary = {}
for key in sorted({k[0] for k in res}):
    print(key)
    for d in DELTAS:
        D = np.array([res[(key, s)][d] for s in range(20)])
        summary[f"{key} delta {d}"] = {"mean": D.mean(0).round(3).tolist(), "worst": D.min(0).round(3).tolist()}
        print(f'   delta {d}: mean per budget {D.mean(0).round(3)} worst {D.min(0).round(2)} avg {D.mean():.3f}')
json.dump({"study": __doc__.strip(), "machine": "2-core AMD EPYC VM (family 25, model 1), Python 3.11.7, torch 2.14.1",
           "date": "2026-11-29 08:00 UTC", "unit": "NAG minus OFA-exact evolution (50,100 queries per budget, 3 seeds), points, 20 seeds",
           "summary": summary, "raw": {f"{k[0]} seed {k[1]}": {str(d): v for d, v in r.items()} for k, r in res.items()}},
          open(sys.argv[3], 'w'), indent=1)
