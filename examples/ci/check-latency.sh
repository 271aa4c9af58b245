#!/usr/bin/env bash
# Gate a model's latency on an Android phone over ADB (or any nagkit device) in CI.
#
#   NAGKIT_MODEL=out/bundle        a bundle folder, bundle .zip, or a .tflite/.onnx file
#   NAGKIT_DEVICE=adb:SERIAL       a device spec (adb:SERIAL, adb:HOST:PORT, cpu...) or a device
#                                  profile (.yaml: a copy of nagkit's android-typical.yaml)
#   NAGKIT_BUDGET_MS=80            the latency budget in milliseconds
#   NAGKIT_RUNS=50                 (optional) minimum timed runs
#   NAGKIT_REPORT=latency.json     (optional) where to write the JSON report
#   NAGKIT="nagkit"                (optional) how to run nagkit, e.g. "python -m nagkit"
#   NAGKIT_PYTHON=python3          (optional) the Python that writes the report
#
# The report is valid JSON on every exit path: nagkit's result when the check ran (`passed`,
# `median_ms`, `budget_ms`, `latency`, `device`, ...), else {"passed": false, "exit_code": N,
# "error": "..."} saying why it did not run. One summary line: "latency gate: PASS (...)" on
# stdout, FAIL or ERROR on stderr.
# Exit codes (from nagkit): 0 within budget, 1 over budget, 2 bad input, 3 device failure.
set -uo pipefail

REPORT="${NAGKIT_REPORT:-latency.json}"
PY="${NAGKIT_PYTHON:-python3}"
read -r -a NAGKIT_CMD <<<"${NAGKIT:-nagkit}"

# report.py MODE REPORT [RC STDOUT STDERR | MESSAGE]: write the report, print the summary line.
report() {
  "$PY" - "$@" <<'PY'
import json, os, sys

mode, path = sys.argv[1], sys.argv[2]


def write(obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def error(rc, message, **extra):
    write({"passed": False, "exit_code": rc, "error": message, **extra})
    print("latency gate: ERROR (" + message + ")", file=sys.stderr)
    return rc


def main():
    if mode == "settings":
        return error(2, sys.argv[3])
    rc = int(sys.argv[3])
    out = open(sys.argv[4], encoding="utf-8", errors="replace").read()
    err = open(sys.argv[5], encoding="utf-8", errors="replace").read()
    try:
        result = json.loads(out)
    except ValueError:
        result = None
    if rc in (0, 1) and isinstance(result, dict) and "passed" in result and result["passed"] == (rc == 0):
        write(dict(result, exit_code=rc))
        line = "%.2f ms %s %g ms on %s" % (result["median_ms"], "<=" if rc == 0 else ">", result["budget_ms"],
                                            result["device"])
        print("latency gate: " + ("PASS (" + line + ")" if rc == 0 else "FAIL (" + line + ")"),
              file=sys.stdout if rc == 0 else sys.stderr)
        return rc
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    first = next((ln[len("error: "):] for ln in lines if ln.startswith("error: ")), lines[-1] if lines else "")
    hint = next((ln[len("hint: "):] for ln in lines if ln.startswith("hint: ")), None)
    code = rc if rc not in (0, 1) else 3  # a check that printed no result is a failure to run it
    return error(code, first or "nagkit exited %d without a result" % rc, hint=hint, nagkit_exit_code=rc)


sys.exit(main())
PY
}

for var in NAGKIT_MODEL NAGKIT_DEVICE NAGKIT_BUDGET_MS; do
  if [ -z "${!var:-}" ]; then
    report settings "$REPORT" "$var is not set: set NAGKIT_MODEL (a bundle, .zip, .tflite or .onnx), NAGKIT_DEVICE (adb:SERIAL or a profile) and NAGKIT_BUDGET_MS (milliseconds)"
    exit $?
  fi
done

args=(check "$NAGKIT_MODEL" --device "$NAGKIT_DEVICE" --budget "$NAGKIT_BUDGET_MS" --json)
if [ -n "${NAGKIT_RUNS:-}" ]; then
  args+=(--runs "$NAGKIT_RUNS")
fi

out="$(mktemp)"
err="$(mktemp)"
trap 'rm -f "$out" "$err"' EXIT
"${NAGKIT_CMD[@]}" "${args[@]}" >"$out" 2>"$err"
rc=$?
cat "$err" >&2  # nagkit's own lines (the over-budget error, a failure's message and hint) stay in the log
report result "$REPORT" "$rc" "$out" "$err"
exit $?
