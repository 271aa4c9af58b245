#!/usr/bin/env bash
# `make test`'s two phases, timed: wall and CPU of each phase (GNU time), every test's CPU and wall
# (cputime_plugin.py), the load average every 20 s. Run from the repository root:
#   bash benchmarks/suite/time_suite.sh OUT_DIR [PYTHON]
# then: python benchmarks/suite/summarize.py OUT_DIR > benchmarks/suite/results/LABEL.json
set -uo pipefail
out=$(realpath -m "$1"); py=${2:-.venv/bin/python}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" CPUTIME_OUT="$out/cpu"
export PYTHONDONTWRITEBYTECODE=  # bytecode written, as `make test` does
( while true; do echo "$(date +%s) $(cat /proc/loadavg)" >> "$out/load.txt"; sleep 20; done ) & sampler=$!
trap 'kill $sampler' EXIT
/usr/bin/time -f "%e %U %S" -o "$out/time1" nice -n 10 "$py" -m pytest -q -n 2 --dist loadfile -m "not serial" \
  --durations=40 -p no:cacheprovider -p cputime_plugin > "$out/phase1.txt" 2>&1; echo "rc1=$?" >> "$out/rc"
/usr/bin/time -f "%e %U %S" -o "$out/time2" nice -n 10 "$py" -m pytest -q -m serial \
  --durations=40 -p no:cacheprovider -p cputime_plugin > "$out/phase2.txt" 2>&1; echo "rc2=$?" >> "$out/rc"
