"""Generation's decode side by side (docs/decisions.md 51): the whole zero-query `generate` call per
budget, with the NumPy decode (nagkit.nag.fast_decode, the default) and with Generator.forward (the
decode before it), interleaved budget by budget in the same process, so the host's drift falls on
both alike; and a hash of every generated arch and score under each, to show they choose the same.

    .venv/bin/python benchmarks/nag/bench_decode.py [--rounds 5]

Per shipped workspace (ofa-note10, ofa-cpu-w1.0, fmnist): its bench budgets (fmnist: 8 across
its range), after one warm-up pass; each round times every budget once with each decode, the
order alternating (ABBA). Writes ``decode-2-core.json`` beside this script (per workspace the
median and the quartiles of the per-budget times under each decode, the share of budgets over
20 ms, both hashes), with the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from bench_nag import DEFAULT_BUDGETS, machine  # noqa: E402

from nagkit.io import atomic_write_json  # noqa: E402

LIMIT_MS = 20.0  # issue 33: generation stays <= 20 ms per budget


def forward_sample(gen, budgets, generator, greedy_rows, temperature=1.0):
    """The decode before decisions 51: Generator.forward, as sample_archs called it."""
    import torch

    rows = torch.from_numpy(greedy_rows) if greedy_rows is not None else False
    dec, _, _ = gen(torch.from_numpy(budgets), generator=generator, temperature=temperature, stats=False,
                    greedy=rows)
    return dec.r, dec.depth, dec.k, dec.e


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "decode-2-core.json")
    a = ap.parse_args()
    from nagkit.app.workspace import load_workspace
    from nagkit.nag import fast_decode

    numpy_sample = fast_decode.sample
    arms = {"numpy": numpy_sample, "forward": forward_sample}
    info = machine()
    out: dict = {"benchmark": "generation-decode-side-by-side", "machine": info, "rounds": a.rounds,
                 "limit_ms": LIMIT_MS, "workspaces": {}}
    for name in ("ofa-note10", "ofa-cpu-w1.0", "fmnist"):
        m = load_workspace(name).nag_model(with_source=False)
        lo, hi = m.range_ms
        budgets = DEFAULT_BUDGETS.get(name) or [float(b) for b in np.geomspace(lo * 1.05, hi, 8)]
        times: dict[str, list[float]] = {k: [] for k in arms}
        hashes = {}
        for arm, fn in arms.items():  # warm-up, and what each decode chooses
            fast_decode.sample = fn
            h = hashlib.sha256()
            for b in budgets:
                for seed in (0, 1):
                    r = m.generate([b], seed=seed, display=False)[0]
                    h.update(json.dumps([str(c.arch) for c in r.candidates]
                                        + [c.evaluator_score for c in r.candidates]).encode())
            hashes[arm] = h.hexdigest()
        for rnd in range(a.rounds):
            order = list(arms) if rnd % 2 == 0 else list(arms)[::-1]
            for b in budgets:
                for arm in order:
                    fast_decode.sample = arms[arm]
                    t0 = time.perf_counter()
                    m.generate([b], display=False)
                    times[arm].append(time.perf_counter() - t0)
        fast_decode.sample = numpy_sample
        row = {"budgets_ms": budgets, "same_choices": hashes["numpy"] == hashes["forward"], "hash": hashes}
        for arm, ts in times.items():
            ms = 1000 * np.asarray(ts)
            row[arm] = {"median_ms": round(float(np.median(ms)), 2),
                        "quartiles_ms": [round(float(q), 2) for q in np.percentile(ms, [25, 75])],
                        "max_ms": round(float(ms.max()), 2), "share_over_limit": round(float((ms > LIMIT_MS).mean()), 3),
                        "times_ms": [round(float(x), 3) for x in ms]}
        row["speedup_median"] = round(row["forward"]["median_ms"] / row["numpy"]["median_ms"], 2)
        out["workspaces"][name] = row
        print(f"{name}: numpy {row['numpy']['median_ms']} ms, forward {row['forward']['median_ms']} ms "
              f"(x{row['speedup_median']}), same choices: {row['same_choices']}", flush=True)
    info["load_avg_end"] = __import__("os").getloadavg()
    atomic_write_json(a.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
