"""Where the raw block sums' bias comes from (issue 17's "find the −4.8 %"; a diagnostic, not a feature).

On the AMD EPYC VM the raw block sums of a CLI table read whole networks 4.5–5.3 % low
(decisions 29): a whole network costs more than its blocks timed one by one. This script takes
networks a ``bench_cli_path.py`` run has already converted (its table's calibration networks and
its block cache, so nothing is converted here) and times, for each network, in the same passes:

- ``whole``: the exported network, as ``nagkit lut calibrate`` and the plain timer time it;
- ``isolated``: each of its blocks on its own, warm (what ``nagkit profile`` records), summed;
- ``chained``: the same block files invoked one after another in a loop, each block's output
  copied into the next block's input before it runs (untimed), each invoke timed alone and the
  chain's times summed. The files and their ops are those of ``isolated``; only the cache state
  differs: as in a whole network, the other blocks' weights and activations pass through the
  caches between two runs of one block;
- ``isolated_cold``: each block on its own with the caches flushed (a 48 MiB buffer read and
  written, untimed) before every invoke: the upper bound for a block that finds nothing cached.
- with ``--channels-last DIR``, also ``isolated_cl`` and ``chained_cl``: the same blocks converted
  with channels-last (NHWC) input and output (``litert_torch.to_channel_last_io``), so no layout
  transpose sits at their ends, timed alone and as a chain. These are converted here, into DIR,
  before any timing.

The host of this VM changes speed within seconds (decisions 26), so the four are measured in
paired rounds of about 0.2 s: one round times the whole file once (after one untimed invoke),
the chain once (after one untimed round), each block alone (the median of 3 invokes after one
untimed) and each block cold once, in a rotating order. Each method is compared with ``whole``
within its round; the median of those ratios over ``--passes`` x ``--rounds`` rounds is the
network's figure. The op lists of the whole file and the block files are compared too (the
blocks carry their own layout transposes). If ``chained`` matches ``whole`` while ``isolated`` reads low, the bias is the cache
state of blocks timed alone.

    python benchmarks/latency/bias_anatomy.py --run .cache/bench2/cli-path-litert-ofa-mbv3-w1.0-r224-default-run4
    # -> results/bias-anatomy-<cpu>-<date>.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_diagnostics import time_invokes  # noqa: E402 - after the path set-up

FLUSH_BYTES = 48 << 20  # one and a half times this VM's 32 MiB L3


def open_interp(path: Path):
    from nagkit.runtimes.litert import open_interpreter

    it = open_interpreter(str(path), 1)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(d["dtype"]))
    return it


def ops_of(it) -> collections.Counter:
    return collections.Counter(op["op_name"] for op in it._get_ops_details())  # noqa: SLF001


class Chain:
    """One network's block files: timed alone (warm or after a flush) or one after another."""

    def __init__(self, files: list[Path]):
        self.blocks = [open_interp(f) for f in files]
        self.io = [(b.get_input_details()[0]["index"], b.get_output_details()[0]["index"]) for b in self.blocks]

    def isolated_ms(self) -> float:
        total = 0.0
        for b in self.blocks:
            b.invoke()
            total += time_invokes(b, 3)
        return total

    def _chain_round(self) -> list[float]:
        out, prev = [], None
        for b, (i_in, i_out) in zip(self.blocks, self.io):
            if prev is not None:
                b.set_tensor(i_in, prev.reshape(b.get_input_details()[0]["shape"]))
            t = time.perf_counter()
            b.invoke()
            out.append(time.perf_counter() - t)
            prev = b.get_tensor(i_out)
        return out

    def chained_ms(self) -> float:
        self._chain_round()
        return sum(self._chain_round()) * 1e3

    def isolated_cold_ms(self, flush: np.ndarray) -> float:
        total = 0.0
        for b in self.blocks:
            flush += 1.0
            t = time.perf_counter()
            b.invoke()
            total += time.perf_counter() - t
        return total * 1e3


class Network:
    def __init__(self, whole: Path, blocks: list[Path], blocks_cl: list[Path] | None = None):
        self.whole = open_interp(whole)
        self.chain = Chain(blocks)
        self.chain_cl = Chain(blocks_cl) if blocks_cl else None

    def whole_ms(self) -> float:
        self.whole.invoke()
        t = time.perf_counter()
        self.whole.invoke()
        return (time.perf_counter() - t) * 1e3

    def method(self, name: str, flush: np.ndarray):
        return {"whole": self.whole_ms, "isolated": self.chain.isolated_ms, "chained": self.chain.chained_ms,
                "isolated_cold": lambda: self.chain.isolated_cold_ms(flush),
                "isolated_cl": lambda: self.chain_cl.isolated_ms(), "chained_cl": lambda: self.chain_cl.chained_ms()}[name]


def convert_channels_last(layers: dict, out_dir: Path) -> dict[str, Path]:
    """Each block converted as the profile converts it, but with channels-last (NHWC) input and
    output (``litert_torch.to_channel_last_io``), so no layout transpose sits at its ends."""
    import litert_torch
    import torch

    from nagkit.latency.blocks import build_block
    from nagkit.space import layer_input_shape

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for key, layer in layers.items():
        p = out_dir / f"{key}.tflite"
        if not p.exists():
            shape = layer_input_shape(layer)
            block = build_block(layer)
            rank = block(torch.zeros(shape)).dim()
            wrapped = litert_torch.to_channel_last_io(block, args=[0], outputs=[0] if rank >= 3 else []).eval()
            nhwc = torch.zeros((shape[0], shape[2], shape[3], shape[1]))
            litert_torch.convert(wrapped, (nhwc,)).export(str(p.with_suffix(".tmp")))
            p.with_suffix(".tmp").rename(p)
        files[key] = p
    return files


def main(argv=None) -> int:
    from bench_cpu import LoadSampler, machine_info

    from nagkit.io import atomic_write_json
    from nagkit.latency.blocks import BlockCache
    from nagkit.latency.keys import block_key
    from nagkit.latency.table import LatencyTable, utc_now
    from nagkit.latency.validate import NetworkCache
    from nagkit.space import get_space

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a bench_cli_path.py work dir (table.json, cache/)")
    ap.add_argument("--networks", type=int, default=16, help="the first N of the table's calibration networks")
    ap.add_argument("--passes", type=int, default=3, help="passes over the networks")
    ap.add_argument("--rounds", type=int, default=15, help="paired rounds per network per pass")
    ap.add_argument("--cpu", type=int, default=1, help="the core the timing is pinned to")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--channels-last", type=Path, default=None,
                    help="also convert the blocks with NHWC input and output into this folder (before any "
                         "timing) and time them alone and as a chain")
    args = ap.parse_args(argv)

    table = LatencyTable.load(args.run / "table.json")  # checks the file
    raw = json.loads((args.run / "table.json").read_text())
    space = get_space(raw["space"]["name"])
    cal = raw["calibration"]
    nets_cache = NetworkCache("tflite", args.run / "cache")
    blocks_cache = BlockCache("tflite", args.run / "cache")
    picked = list(range(min(args.networks, len(cal["fit_archs"]))))
    cl_files = {}
    if args.channels_last:
        layers = {block_key(ly): ly for i in picked for ly in space.layers(space.parse_arch(cal["fit_archs"][i]))}
        t = time.perf_counter()
        cl_files = convert_channels_last(layers, args.channels_last)
        print(f"{len(layers)} channels-last blocks ready ({time.perf_counter() - t:.0f} s)", flush=True)
    os.sched_setaffinity(0, {args.cpu})
    methods = ["whole", "isolated", "chained", "isolated_cold"] + (["isolated_cl", "chained_cl"] if cl_files else [])
    nets, rows = [], []
    for i in picked:
        arch = space.parse_arch(cal["fit_archs"][i])
        keys = [block_key(layer) for layer in space.layers(arch)]
        files = [blocks_cache.path_for(k) for k in keys]
        whole = nets_cache.path_for(space, arch)
        missing = [str(p) for p in [whole, *files] if not p.exists()]
        if missing:
            raise SystemExit(f"not converted in {args.run}: {missing[:3]} (run bench_cli_path.py there first)")
        net = Network(whole, files, [cl_files[k] for k in keys] if cl_files else None)
        ops_whole = ops_of(net.whole)
        ops_blocks = sum((ops_of(b) for b in net.chain.blocks), collections.Counter())
        nets.append(net)
        rows.append({"arch": str(arch), "blocks": len(keys), "table_raw_sum_ms": cal["fit_raw_ms"][i],
                     "table_measured_ms": cal["fit_measured_ms"][i],
                     "ops_whole": dict(sorted(ops_whole.items())), "ops_blocks": dict(sorted(ops_blocks.items())),
                     "rounds": {m: [] for m in methods}})
        if net.chain_cl:
            rows[-1]["ops_blocks_cl"] = dict(sorted(sum((ops_of(b) for b in net.chain_cl.blocks),
                                                        collections.Counter()).items()))
    flush = np.zeros(FLUSH_BYTES // 8)
    t0 = time.perf_counter()
    with LoadSampler() as load:
        for p in range(args.passes):
            for net, row in zip(nets, rows):
                for k in range(args.rounds):
                    j = p * args.rounds + k
                    q = j % len(methods)
                    order = methods[q:] + methods[:q]  # rotate, so no method always runs first
                    got = {m: net.method(m, flush)() for m in order}
                    for m in methods:
                        row["rounds"][m].append(round(got[m], 4))
            print(f"pass {p + 1}/{args.passes} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    for row in rows:
        r = {m: np.array(v) for m, v in row["rounds"].items()}
        row["median_ms"] = {m: round(float(np.median(v)), 4) for m, v in r.items()}
        row["paired_vs_whole_pct"] = {m: round(float(np.median(r[m] / r["whole"]) - 1) * 100, 2) for m in methods[1:]}
        row["round_sd_pct"] = round(float(1.4826 * np.median(np.abs(r["whole"] - np.median(r["whole"])))
                                          / np.median(r["whole"]) * 100), 2)
    summary = {}
    for m in methods[1:]:
        d = np.array([r["paired_vs_whole_pct"][m] for r in rows])
        summary[m] = {"median_pct": round(float(np.median(d)), 2), "mean_pct": round(float(d.mean()), 2),
                      "min_pct": round(float(d.min()), 2), "max_pct": round(float(d.max()), 2),
                      "sd_pct": round(float(d.std(ddof=1)), 2) if len(d) > 1 else None}
    tr = np.array([(r["table_raw_sum_ms"] / r["table_measured_ms"] - 1) * 100 for r in rows])
    summary["table_raw_vs_table_measured"] = {"median_pct": round(float(np.median(tr)), 2),
                                              "mean_pct": round(float(tr.mean()), 2)}
    wt = np.array([(r["median_ms"]["whole"] / r["table_measured_ms"] - 1) * 100 for r in rows])
    summary["whole_now_vs_table_measured"] = {"median_pct": round(float(np.median(wt)), 2)}
    extra = collections.Counter()
    for r in rows:
        extra.update({k: r["ops_blocks"].get(k, 0) - r["ops_whole"].get(k, 0)
                      for k in set(r["ops_blocks"]) | set(r["ops_whole"])})
    summary["ops_blocks_minus_whole_total"] = {k: v for k, v in sorted(extra.items()) if v}
    res = {"benchmark": "latency/bias_anatomy.py", "machine": machine_info(), "when": utc_now(),
           "argv": sys.argv[1:], "run": str(args.run), "table_created": raw["created"],
           "passes": args.passes, "rounds": args.rounds, "flush_bytes": FLUSH_BYTES, "pinned_cpu": args.cpu,
           "wall_s": round(time.perf_counter() - t0, 1), "load": load.summary(), "summary": summary,
           "networks": rows}
    cpu = "amd-epyc" if "EPYC" in json.dumps(res["machine"]) else "cpu"
    out = args.out or Path(__file__).resolve().parent / "results" / f"bias-anatomy-{cpu}-{time.strftime('%Y-%m-%d')}.json"
    atomic_write_json(out, res)
    print(json.dumps(summary, indent=1))
    print("->", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
