#!/usr/bin/env bash
# Gate a model's latency on an Android phone over ADB (or any nagkit device) in CI.
#
#   NAGKIT_MODEL=out/bundle        a bundle folder, bundle .zip, or a .tflite/.onnx file
#   NAGKIT_DEVICE=my-phone.yaml    a device profile (copy device_profiles/android-typical.yaml
#                                  and set `device: adb:SERIAL`), or a spec like adb:SERIAL
#   NAGKIT_BUDGET_MS=80            the latency budget in milliseconds
#   NAGKIT_RUNS=50                 (optional) minimum timed runs
#   NAGKIT_REPORT=latency.json     (optional) where to write the JSON result
#
# Exit codes (from nagkit): 0 within budget, 1 over budget, 2 bad input, 3 device failure.
set -euo pipefail

: "${NAGKIT_MODEL:?set NAGKIT_MODEL to a bundle folder, .zip, .tflite or .onnx}"
: "${NAGKIT_DEVICE:?set NAGKIT_DEVICE to a device profile (.yaml) or a spec such as adb:SERIAL}"
: "${NAGKIT_BUDGET_MS:?set NAGKIT_BUDGET_MS to the latency budget in ms}"
NAGKIT="${NAGKIT:-nagkit}"
REPORT="${NAGKIT_REPORT:-latency.json}"

args=(check "$NAGKIT_MODEL" --device "$NAGKIT_DEVICE" --budget "$NAGKIT_BUDGET_MS" --json)
if [ -n "${NAGKIT_RUNS:-}" ]; then
  args+=(--runs "$NAGKIT_RUNS")
fi

set +e
$NAGKIT "${args[@]}" >"$REPORT"
rc=$?
set -e

case "$rc" in
  0) echo "latency gate: PASS ($(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(f"{r[\"median_ms\"]:.2f} ms <= {r[\"budget_ms\"]:g} ms")' "$REPORT"))" ;;
  1) echo "latency gate: FAIL ($(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(f"{r[\"median_ms\"]:.2f} ms > {r[\"budget_ms\"]:g} ms")' "$REPORT"))" >&2 ;;
  *) echo "latency gate: ERROR (nagkit exit $rc; see the message above)" >&2 ;;
esac
exit "$rc"
