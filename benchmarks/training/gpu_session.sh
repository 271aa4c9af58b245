#!/usr/bin/env bash
# One call on the lent 2-GPU machine: DDP throughput benchmark, then the real training of the
# Fashion-MNIST supernet, then its smallest/largest accuracies. Needs Fashion-MNIST in .fmnist/.
# Usage (device tool): PYTHONPATH=. bash benchmarks/training/gpu_session.sh bench|train|resume
set -euo pipefail
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-out/gpu}
mkdir -p "$OUT" out
TRAIN_DIR=out/fmnist-train
EPOCHS=${EPOCHS:-full=10,kernel=5,depth=3,expand=3}
for stage in "$@"; do
case "$stage" in
  info)
    nvidia-smi -L; python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"; nproc ;;
  probe)
    python3 benchmarks/training/cudnn_probe.py --data-dir .fmnist --out "$OUT/cudnn_probe.json" --steps "${PROBE_STEPS:-45}" ;;
  graphprobe)
    # eager fixed-shape vs CUDA-graph steps (decisions.md 13): same seeds, losses must agree
    python3 benchmarks/training/cudnn_probe.py --data-dir .fmnist --out "$OUT/graph_probe.json" --modes fixed,graphs \
      --steps "${PROBE_STEPS:-60}" ;;
  graphtest)
    if python3 -c "import pytest" 2>/dev/null; then
      python3 -m pytest -q -p no:cacheprovider tests/supernet/test_tensor_control.py tests/supernet/test_fixed_shape.py 2>&1 | tail -15
    else echo "graphtest: no pytest on this machine"; fi ;;
  ofacompare)
    PYTHONPATH=.:.ofa_src python3 benchmarks/training/ofa_trainer_compare.py --data-dir .fmnist --nagkit-eager \
      --out "$OUT/ofa_compare.json" --max-seconds "${OFA_S:-200}" ;;
  pickconv)
    # Use PyTorch's native CUDA convolutions when the probe found them faster (NAGKIT_CUDNN=0).
    python3 -c "import json,sys; r={x['mode']:x['total_s'] for x in json.load(open('$OUT/cudnn_probe.json'))['rows']}; sys.exit(0 if r['native']<r['cudnn'] else 1)" \
      && echo 0 > out/nagkit_cudnn || echo 1 > out/nagkit_cudnn; echo "NAGKIT_CUDNN=$(cat out/nagkit_cudnn)" ;;
  bench)
    python3 benchmarks/training/ddp_throughput.py --data-dir .fmnist --out "$OUT/ddp_throughput.json" ;;
  train)
    python3 -m nagkit.supernet.launch --out $TRAIN_DIR --gpus "${GPUS:-1}" --data-dir .fmnist --epochs "$EPOCHS" \
      --max-minutes "${MAXMIN:-6}" ${RESUME:-} ${TRAINFLAGS:-} ;;
  export)
    cp $TRAIN_DIR/train_log.jsonl "$OUT/" 2>/dev/null || true
    for f in supernet.pt status.json; do [ -f $TRAIN_DIR/$f ] && cp $TRAIN_DIR/$f "$OUT/"; done; true ;;
  evalgpu)
    python3 - <<'PY'
import json, time, torch, os
from nagkit.data.supernet_acc import SupernetEvaluator
from nagkit.space import get_space
from nagkit.space.sampling import sample_many
s = get_space("fmnist-mbv3-w0.5")
res = {}
for split in ("val", "test"):
    ev = SupernetEvaluator("out/fmnist-train/supernet.pt", s, {"data_dir": ".fmnist", "device": "cuda", "split": split})
    archs = [s.smallest(), s.largest(), s.smallest(40), s.largest(28)]
    res[split] = dict(zip(map(str, archs), ev(archs).tolist()))
t = time.perf_counter(); archs = sample_many(s, 40, 123); ev(archs); torch.cuda.synchronize()
res["seconds_per_arch_gpu"] = (time.perf_counter() - t) / 40
print(json.dumps(res))
open(os.environ.get("OUT", "out/gpu") + "/eval.json", "w").write(json.dumps(res, indent=1))
PY
    ;;
  collect)
    python3 -m torch.distributed.run --nproc-per-node 2 -m nagkit.data.supernet_acc --ckpt $TRAIN_DIR/supernet.pt \
      --space fmnist-mbv3-w0.5 --num-archs "${NARCH:-4000}" --seed 0 --out out/acc --data-dir .fmnist
    python3 -m nagkit.data.supernet_acc --ckpt $TRAIN_DIR/supernet.pt --space fmnist-mbv3-w0.5 --num-archs 0 --out out/acc \
      --data-dir .fmnist --merge
    cp out/acc/acc.jsonl "$OUT/" ;;
  collect1)
    # One GPU, NPROC processes sharing it (hides per-arch Python overhead); rank r of w takes
    # archs r::w and appends to out/acc/acc.rank{r}.jsonl (resumable).
    n=${NPROC:-3}
    for r in $(seq 0 $((n - 1))); do
      RANK=$r WORLD_SIZE=$n LOCAL_RANK=0 timeout "${COLLECT_S:-300}" python3 -m nagkit.data.supernet_acc --ckpt $TRAIN_DIR/supernet.pt \
        --space fmnist-mbv3-w0.5 --num-archs "${NARCH:-4000}" --seed 0 --out out/acc --data-dir .fmnist --device cuda:0 &
    done
    wait ;;
  collectout)
    python3 -m nagkit.data.supernet_acc --ckpt $TRAIN_DIR/supernet.pt --space fmnist-mbv3-w0.5 --num-archs 0 --out out/acc \
      --data-dir .fmnist --merge --device cuda:0
    cp out/acc/acc.jsonl "$OUT/" ;;
  compare)
    # #6: NAG vs evolution and random search at equal accuracy-source queries, with real supernet
    # evaluation on the GPU (NAG: 1,000 dataset archs + 10 reranks x 5 budgets = 1,050 queries;
    # each baseline: 210 per budget). Writes compare.json, compare.log and plots/ to $OUT.
    export NAGKIT_FMNIST_DIR=${NAGKIT_FMNIST_DIR:-$PWD/.fmnist}  # the supernet source reads the IDX files here
    W=out/fm; rm -rf $W; cp -r nagkit/resources/workspaces/fmnist $W
    sed -i "s/^workers = 2.*/workers = ${CWORKERS:-5}\ndevice = \"cuda\"/" $W/nagkit.toml
    # CMETHODS / CSEEDS / CTAG: other methods, --seeds N per baseline, a suffix for the output names
    T=${CTAG:-}
    python3 -m nagkit compare --workspace $W --budgets 0.5,0.8,1.2,1.8,2.6 --methods "${CMETHODS:-nag,evolution,random}" \
      --seeds "${CSEEDS:-1}" --queries 210 --rerank 10 --json --plot "$OUT/plots$T" > "$OUT/compare$T.json" \
      2> "$OUT/compare$T.log"
    cp $W/supernet/acc.jsonl "$OUT/acc_after_compare$T.jsonl" ;;
  heldout)
    # the returned archs of compare$CTAG.json on the test split (selection-bias-free check)
    python3 benchmarks/compare/fmnist/heldout_test.py --compare "$OUT/compare${CTAG:-}.json" --data-dir .fmnist \
      --device cuda --out "$OUT/heldout_test${CTAG:-}.json" ;;
esac
done
