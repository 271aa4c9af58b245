"""The gain from fine-tuning on the fmnist workspace: inherited supernet weights vs N epochs.

    python benchmarks/finetune/bench_finetune.py [--budgets 0.5,2.5] [--epochs 1,3] [--seeds 0,1,2]
        [--device-train cpu|cuda] [--threads 1] [--jobs 1] [--out FILE]

For each budget, the workspace's generator picks the arch exactly as `nagkit build` does (its
first candidate, seed 0). That subnet is measured with inherited weights (BN recalibrated on
2,000 training images, as the build exports it) and after N epochs of
`nagkit build --finetune N` (nagkit.app.finetune.finetune_on_fmnist: the Fashion-MNIST
training split minus the 5,000 validation images, the supernet's augmentation, SGD + Nesterov,
lr 0.01 cosine, batch 128, BN recalibrated again), one run per seed. Accuracies are top-1 of
the PyTorch subnet (fp32) on the validation split (5,000) and the test set (10,000; never used
for training or for picking anything). The exported TFLite/ONNX models match the PyTorch
subnet within the parity tolerance, so these are the bundles' accuracies.

Writes JSON with the command, the machine (CPU model, cores, load average at start and end,
GPU, torch), and per budget the arch, the inherited accuracies and each run's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def machine() -> dict:
    import torch

    from nagkit import __version__

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "gpu": gpu, "nagkit": __version__}


def test_accuracy(sub, space, arch, sp) -> float:
    import torch

    from nagkit.supernet.evaluate import accuracy

    x, y = torch.as_tensor(sp.test_x).unsqueeze(1), torch.as_tensor(sp.test_y)
    return accuracy(sub.cpu().eval(), x, y, arch.r, space.mean, space.std, batch_size=1000)


def one_budget(ws, net, split, sp, budget: float, epochs: list[int], seeds: list[int], device: str) -> dict:
    from nagkit.app.build import _predict
    from nagkit.app.finetune import FinetuneOptions, finetune_on_fmnist
    from nagkit.supernet.finetune import recalibrate_subnet

    space = ws.space
    model = ws.nag_model(with_source=False)
    arch = model.generate([budget], seed=0, top=1, display=False)[0].candidates[0].arch
    pred, _ = _predict(ws.latency_table, space, arch)
    inherited = recalibrate_subnet(net.extract(arch), space, split)
    row = {"budget_ms": budget, "arch": str(arch), "predicted_ms": round(pred, 4),
           "inherited": {"test": test_accuracy(inherited, space, arch, sp)}, "runs": []}
    print(json.dumps({"budget_ms": budget, "arch": str(arch), "inherited_test": row["inherited"]["test"]}), flush=True)
    for e in epochs:
        for s in seeds:
            t = time.perf_counter()
            ft = finetune_on_fmnist(net.extract(arch), space, arch, split,
                                    FinetuneOptions(epochs=e, seed=s, device_train=device))
            row["inherited"]["val"] = ft.before["value"]
            run = {"epochs": e, "seed": s, "val": ft.after["value"], "test": test_accuracy(ft.module, space, arch, sp),
                   "seconds": round(time.perf_counter() - t, 1)}
            row["runs"].append(run)
            print(json.dumps(dict(run, budget_ms=budget)), flush=True)
    for e in epochs:
        for part in ("test", "val"):
            gains = [100 * (r[part] - row["inherited"][part]) for r in row["runs"] if r["epochs"] == e]
            row[f"{part}_gain_points_{e}ep"] = {"mean": round(statistics.mean(gains), 3),
                                                 "min": round(min(gains), 3), "max": round(max(gains), 3)}
    return row


def run_budgets(a) -> list[dict]:
    """Each budget in this process (``--jobs 1``) or in its own worker process (the budgets'
    runs are independent; a worker is this script with one budget and ``--rows-out``)."""
    import subprocess
    import tempfile

    budgets = [float(b) for b in a.budgets.split(",")]
    if a.jobs <= 1 or len(budgets) == 1:
        from nagkit.app.build import _split
        from nagkit.app.workspace import load_workspace
        from nagkit.supernet import load_supernet

        ws = load_workspace(a.workspace)
        net = load_supernet(ws.supernet_path(), ws.space)
        split = _split(ws)
        sp = split.load(with_test=True)
        epochs, seeds = [int(v) for v in a.epochs.split(",")], [int(v) for v in a.seeds.split(",")]
        return [one_budget(ws, net, split, sp, b, epochs, seeds, a.device_train) for b in budgets]
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"rows{i}.json" for i in range(len(budgets))]
        procs = [subprocess.Popen([sys.executable, __file__, "--workspace", a.workspace, "--budgets", str(b),
                                   "--epochs", a.epochs, "--seeds", a.seeds, "--device-train", a.device_train,
                                   "--threads", str(a.threads), "--rows-out", str(o)])
                 for b, o in zip(budgets, outs)]
        if [pr.wait() for pr in procs].count(0) != len(procs):
            raise SystemExit("a worker failed (its output is above)")
        return [row for o in outs for row in json.loads(o.read_text())]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="fmnist")
    ap.add_argument("--budgets", default="0.5,2.5")
    ap.add_argument("--epochs", default="1,3")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--device-train", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per process (1: a shared machine)")
    ap.add_argument("--jobs", type=int, default=1, help="budgets measured in parallel processes")
    ap.add_argument("--rows-out", default=None, help=argparse.SUPPRESS)  # a worker's rows (see run_budgets)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    if a.rows_out:
        Path(a.rows_out).write_text(json.dumps(run_budgets(argparse.Namespace(**dict(vars(a), jobs=1)))))
        return 0
    t0, load0 = time.perf_counter(), os.getloadavg()
    rows = run_budgets(a)
    res = {"benchmark": "fine-tuning gain on the fmnist workspace: inherited weights vs N epochs "
                        "(nagkit build --finetune N, PyTorch fp32 accuracies)",
           "command": "python benchmarks/finetune/bench_finetune.py " + " ".join(sys.argv[1:]),
           "workspace": a.workspace, "device_train": a.device_train,
           "epochs": [int(v) for v in a.epochs.split(",")], "seeds": [int(v) for v in a.seeds.split(",")],
           "machine": dict(machine(), load_avg_start=load0, load_avg_end=os.getloadavg()),
           "wall_s": round(time.perf_counter() - t0, 1), "budgets": rows}
    out = Path(a.out or ROOT / "benchmarks" / "finetune" / f"finetune_{a.workspace}_{a.device_train.split(':')[0]}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
