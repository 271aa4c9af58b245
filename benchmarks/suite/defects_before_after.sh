#!/usr/bin/env bash
# Issue 35's adversarial defects, before and after: main's tests for items 1-8 run against an old
# commit (before the fixes) and against main.
#
#   bash benchmarks/suite/defects_before_after.sh OLD_COMMIT [OUT_JSON]
#
# OLD_COMMIT  the commit before the fixes (24b227b)
# OUT_JSON    default benchmarks/suite/results/defects-<OLD>-vs-main.json
# Settings:   DEFECTS_WT (the old worktree, default <repo>/../wt-old; must not exist),
#             DEFECTS_TIMEOUT (seconds per test call, default 60), PY (default <repo>/.venv/bin/python),
#             DEFECTS_ONLY (node ids or test functions of the list below, space-separated: run only
#             those, on both trees, and merge their rows into the existing OUT_JSON; the other rows,
#             and the full run's figures, stay as they were; the run is appended to partial_runs)
#
# What it does: `git worktree add --detach` of OLD_COMMIT; copies into it, from main's HEAD, only
# the test files that hold the item 1-8 tests and the helpers they import (no source file); runs
# the chosen node ids there with PYTHONPATH=<worktree> (nagkit imported from the old tree: checked,
# runs.old.nagkit_file), one pytest process, no xdist, a per-test watchdog (old defects hang).
# A test module that does not import on the old code (tests/cli/test_limits.py needs SEED_MAX and
# the count bounds, which the fix added) is run once more with only those constants defined in
# the old package (old_shimmed), so its test bodies meet the old behaviour. Then the same node ids
# on main, in this checkout. The worktree is removed at the end. Nothing in the checkout changes
# but OUT_JSON. ~9 minutes on a 2-core VM (the old code's hangs and builds run into the watchdog).
#
#   DEFECTS_ONLY="tests/cli/test_force.py::test_init_force_never_replaces_a_users_folder" \
#     bash benchmarks/suite/defects_before_after.sh 24b227b     # one test, merged into the JSON
set -euo pipefail
old=${1:?usage: defects_before_after.sh OLD_COMMIT [OUT_JSON]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
py=${PY:-$repo/.venv/bin/python}
if [ -z "${PY:-}" ] && [ ! -x "$py" ]; then  # a linked worktree has no .venv: the main checkout's
  py=$(git -C "$repo" worktree list --porcelain | sed -n '1s/^worktree //p')/.venv/bin/python
fi
wt=${DEFECTS_WT:-$(dirname "$repo")/wt-old}
limit=${DEFECTS_TIMEOUT:-60}
old_sha=$(git -C "$repo" rev-parse --verify "$old^{commit}")
new_sha=$(git -C "$repo" rev-parse HEAD)
out=$(realpath -m "${2:-$here/results/defects-$(git -C "$repo" rev-parse --short=7 "$old_sha")-vs-main.json}")
[ -e "$wt" ] && { echo "$wt exists: remove it (git worktree remove --force $wt) or set DEFECTS_WT" >&2; exit 2; }
tmp=$(mktemp -d)
cleanup() { git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true; git -C "$repo" worktree prune; rm -rf "$tmp"; }
trap cleanup EXIT

cat > "$tmp/defects_plugin.py" <<'PLUGIN'
"""pytest plugin for defects_before_after.sh: a per-test watchdog (no pytest-timeout here), one
JSON line per test phase, the collection errors, and where `nagkit` was imported from.

DEFECTS_TIMEOUT  seconds a test's call may run (default 60); past it SIGUSR1 raises TestTimeout
                 in the test (a blocked open() of a FIFO is interrupted too), re-sent every 5 s.
DEFECTS_LOG      the JSON-lines file written.
DEFECTS_SHIM     "1": before collection, define in the old package the constants main's tests
                 import and the old code lacks (values as on main); nothing else is changed.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

SHIM = {"nagkit.errors": {"SEED_MAX": 2**32 - 1},
        "nagkit.nag.config": {"MAX_SAMPLES": 100_000, "DATASET_N_MAX": 100_000_000, "MAX_EPOCHS": 100_000}}


class TestTimeout(BaseException):
    """Raised in the test past DEFECTS_TIMEOUT (a BaseException: `except Exception` cannot eat it)."""


def _log(rec):
    with open(os.environ["DEFECTS_LOG"], "a") as f:
        f.write(json.dumps(rec) + "\n")


def pytest_configure(config):
    import importlib

    # main's tests use this marker; an old pyproject.toml does not register it (--strict-markers)
    config.addinivalue_line("markers", "shared_data(*paths): reads data outside the repository")

    injected = []
    if os.environ.get("DEFECTS_SHIM") == "1":
        for mod, names in SHIM.items():
            m = importlib.import_module(mod)
            for k, v in names.items():
                if not hasattr(m, k):
                    setattr(m, k, v)
                    injected.append(f"{mod}.{k}")
    import nagkit

    _log({"kind": "session", "nagkit_file": nagkit.__file__, "shim_injected": injected,
          "timeout_s": float(os.environ.get("DEFECTS_TIMEOUT", "60"))})


def _on_usr1(signum, frame):
    raise TestTimeout(f"still running after {os.environ.get('DEFECTS_TIMEOUT', '60')} s (watchdog)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = float(os.environ.get("DEFECTS_TIMEOUT", "60"))
    done = threading.Event()
    old = signal.signal(signal.SIGUSR1, _on_usr1)

    def watch():
        if done.wait(limit):
            return
        while not done.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            done.wait(5)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        yield
    finally:
        done.set()
        t.join()
        signal.signal(signal.SIGUSR1, old)
        item.user_properties.append(("call_s", round(time.monotonic() - t0, 2)))


def pytest_collectreport(report):
    if report.failed:
        _log({"kind": "collect", "nodeid": report.nodeid, "longrepr": str(report.longrepr)[-4000:]})


def pytest_runtest_logreport(report):
    if report.when == "call" or report.failed or report.skipped:
        crash = getattr(report.longrepr, "reprcrash", None)
        _log({"kind": "test", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
              "duration_s": round(report.duration, 2),
              "crash": crash.message[:1500] if crash is not None else None,
              "crash_len": len(crash.message) if crash is not None else 0,
              "longrepr": str(report.longrepr)[-6000:] if report.failed else None,
              "skip": str(report.longrepr)[:300] if report.skipped else None})
PLUGIN

cat > "$tmp/spec.py" <<'SPEC'
"""Which tests cover which item of issue 35's adversarial list, and the summary of the runs."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
from pathlib import Path

# Test files copied from main into the old worktree (the tests, and the helpers they import).
TEST_FILES = [
    "tests/cli/test_force.py", "tests/cli/test_limits.py", "tests/images/test_folder.py", "tests/test_io.py",
    "tests/test_workspace.py", "tests/build/test_build_errors.py", "tests/devices/test_benchmark_model.py",
    "tests/devices/test_cpu.py", "tests/export/test_bundle_reading.py", "tests/export/test_export_bundle.py",
    # helpers: the fuzzing module (no_hang, check_config), the shared-data paths, the fixtures,
    # the CLI runner and the small ImageFolder / tree snapshot the gap tests build
    "tests/fuzzing.py", "tests/shared_data.py", "tests/conftest.py", "tests/cli/helpers.py",
]

F, L, W, IO = "tests/cli/test_force.py::", "tests/cli/test_limits.py::", "tests/test_workspace.py::", "tests/test_io.py::"
BAD_TOML = W + "test_d5_bad_workspace_toml_is_one_line_exit_2_and_leaves_no_dataset"

# (id, severity, defect, [test node ids: a function covers all its parameters])
ITEMS = [
    ("1", "high", "--force deletes folders that are not bundles (build/finetune/init --force)",
     [F + "test_force_never_deletes_a_users_folder", F + "test_force_replaces_a_bundle_and_an_empty_folder_only",
      F + "test_init_force_never_replaces_a_folder_that_is_not_a_workspace",
      "tests/export/test_export_bundle.py::test_existing_bundle_needs_force",
      F + "test_finetune_force_with_valid_data_never_deletes_a_users_folder",
      F + "test_init_force_never_replaces_a_users_folder"]),
    ("2", "high", "a symlink loop in an ImageFolder hangs / duplicates images",
     ["tests/images/test_folder.py::test_a_link_loop_is_walked_once_and_no_image_counts_twice",
      "tests/images/test_folder.py::test_a_linked_folder_is_followed_once_and_train_val_never_share_a_file"]),
    ("3", "", "generate --samples has no upper bound (10000000, 10**20)",
     [L + "test_generate_samples_is_bounded_and_the_bound_is_stated",
      L + "test_samples_bound_is_the_same_in_toml_build_and_the_api"]),
    ("4", "", "seeds out of range exit 3 (--seed 2**70 finetune/build/export; dataset --seed -1; TOML seed = -1)",
     [L + "test_seeds_out_of_range_are_refused_everywhere_before_any_work", L + "test_workspace_toml_seed_range",
      L + "test_api_seed_keywords_share_the_range", L + "test_accuracy_option_seeds_share_the_range",
      BAD_TOML + "[seed -1]", L + "test_finetune_seed_out_of_range_is_refused_with_every_other_input_valid",
      L + "test_dataset_seed_out_of_range_is_refused_on_a_users_own_workspace"]),
    ("5", "", "over-long names exit 3 (300-char -w name, init destination, TOML latency_table; a 100 KB name echoed whole)",
     [L + "test_an_over_long_workspace_name_is_one_short_line",
      L + "test_an_over_long_init_destination_and_toml_latency_table", L + "test_an_over_long_out_is_one_short_line",
      BAD_TOML + "[100 KB name]", BAD_TOML + "[long artifact key]",
      W + "test_item5_an_over_long_toml_latency_table_is_one_short_line"]),
    ("6", "", "`nagkit init 😀` leaves a broken workspace (invalid TOML escape)",
     [W + "test_item6_init_refuses_a_bad_name_up_front_and_leaves_nothing",
      W + "test_item6_a_folder_path_of_any_name_makes_a_workspace_that_loads",
      W + "test_item6_a_config_that_does_not_load_is_never_renamed_into_place",
      W + "test_item6_toml_string_round_trips_any_text"]),
    ("7", "", "a FIFO as the workspace's latency_table hangs generate; readers must refuse non-regular files",
     [W + "test_item7_workspace_paths_that_are_not_regular_files", IO + "test_the_readers_of_user_files_share_the_rule",
      IO + "test_every_user_path_is_refused_unless_a_regular_file_in_one_short_line"]),
    ("8a", "low", "init over an existing file / non-empty folder / . / .. : raw OSError",
     [W + "test_item8_init_targets_that_cannot_be_a_workspace_are_one_line",
      F + "test_init_force_never_replaces_a_folder_that_is_not_a_workspace"]),
    ("8b", "low", "init --latency-table accepts malformed JSON and 100 MB of whitespace (files read before their size is checked)",
     [W + "test_item8_init_latency_table_is_read_and_checked_before_anything_is_written",
      IO + "test_a_file_over_the_cap_is_refused_from_its_size_before_reading", BAD_TOML + "[over 1 MiB]"]),
    ("8c", "low", "/dev/zero and FIFOs called \"does not exist\"",
     [IO + "test_the_readers_of_user_files_share_the_rule",
      IO + "test_every_user_path_is_refused_unless_a_regular_file_in_one_short_line"]),
    ("8d", "low", "finetune --epochs 10**20 and dataset --n 10**20 accepted",
     [L + "test_finetune_epochs_and_dataset_n_have_the_toml_caps",
      L + "test_finetune_epochs_over_the_cap_is_refused_with_every_other_input_valid",
      L + "test_dataset_n_over_the_cap_is_refused_on_a_users_own_workspace"]),
    ("8e", "low", "cpu:cores=0-8191 prints a 48 KB error", ["tests/devices/test_cpu.py::test_issue35_unavailable_cores_are_echoed_short"]),
    ("8f", "low", "init under umask 027 makes 755/644", [W + "test_item8_init_follows_the_umask"]),
    ("8g", "low", "to_latency_stats TypeError on `count=1 avg=2003.25 std=0`",
     ["tests/devices/test_benchmark_model.py::test_issue35_a_single_run_without_min_max_or_curr"]),
    ("8h", "low", "build --export tflite-int8 --data DIR: the message contradicts --help",
     ["tests/build/test_build_errors.py::test_issue35_data_without_finetune_message_and_help_agree"]),
    ("8i", "low", "check passes a bundle zip with an unlisted 1 GiB entry",
     ["tests/export/test_bundle_reading.py::test_issue35_an_unlisted_entry_is_refused_before_anything_is_extracted",
      "tests/export/test_bundle_reading.py::test_issue35_check_refuses_a_bundle_zip_with_an_unlisted_entry"]),
    ("8j", "low", "a zip whose manifest lists a 3.5 GiB model is extracted and hashed before refusing",
     ["tests/export/test_bundle_reading.py::test_issue35_declared_sizes_are_checked_before_extracting"]),
]

# Sub-points the first run (64f3214) had no test for that reached them on the old code (its tests
# stopped earlier: --data nowhere, the preset's shipped rows, plain init); each is closed when one
# of its tests fails on the old code showing the defect.
SUB_POINTS = [
    ("1", "finetune --force --out DIR, DIR holding a user's file",
     [F + "test_finetune_force_with_valid_data_never_deletes_a_users_folder"]),
    ("1", "init --force DIR, DIR holding a user's file", [F + "test_init_force_never_replaces_a_users_folder"]),
    ("4", "finetune --seed 2**70 (and -1, 2**32)",
     [L + "test_finetune_seed_out_of_range_is_refused_with_every_other_input_valid"]),
    ("4", "dataset --seed -1 (and 2**70, 2**32) on a user's own workspace",
     [L + "test_dataset_seed_out_of_range_is_refused_on_a_users_own_workspace"]),
    ("5", "a workspace TOML latency_table of 300 characters",
     [W + "test_item5_an_over_long_toml_latency_table_is_one_short_line"]),
    ("8d", "finetune --epochs 10**20",
     [L + "test_finetune_epochs_over_the_cap_is_refused_with_every_other_input_valid"]),
    ("8d", "dataset --n 10**20", [L + "test_dataset_n_over_the_cap_is_refused_on_a_users_own_workspace"]),
]
SHOWS = ("direct", "fix-import", "fix-import+shim")

# An ImportError of one of these names on the old code is an ImportError of the fix itself.
FIX_HELPERS = {
    "read_input_file": "nagkit.io.read_input_file, the one reader of user paths (ee01278)",
    "workspace_files": "nagkit.app.workspace_files.toml_string, the TOML string writer (ee01278)",
    "SEED_MAX": "nagkit.errors.SEED_MAX, the one seed range (ee01278); test_limits.py also imports "
                "MAX_SAMPLES, DATASET_N_MAX and MAX_EPOCHS from nagkit.nag.config, new there too",
}

# How a failure on the OLD code reads, where it is not the defect itself (reviewed at 24b227b).
# other-reason: fails before reaching the defect; message-only: the old code refused as well and
# the test fails on the wording or the unstated bound; harness: a name the test patches is absent.
REVIEWED = {
    F + "test_force_never_deletes_a_users_folder[finetune]":
        ("other-reason", "the old finetune refuses --data 'nowhere' before it reaches --out; the folder is not touched"),
    (F + "test_init_force_never_replaces_a_folder_that_is_not_a_workspace", "1"):
        ("other-reason", "fails at its first step, plain `init` into a non-empty folder (raw OSError, exit 3: item 8a); "
                         "the `init --force` step is never reached on the old code"),
    L + "test_generate_samples_is_bounded_and_the_bound_is_stated[0]":
        ("message-only", "0 was already refused by click ('x>=1'); the test wants the bound 1..100000 stated"),
    L + "test_workspace_toml_seed_range[seed = 1.5]":
        ("message-only", "1.5 was already refused ('must be an integer'); the test wants the range stated"),
    **{L + f"test_seeds_out_of_range_are_refused_everywhere_before_any_work[finetune-{s}]":
       ("other-reason", "the old finetune refuses --data 'nowhere' before it reads --seed")
       for s in ("1180591620717411303424", "-1", "4294967296")},
    **{L + f"test_seeds_out_of_range_are_refused_everywhere_before_any_work[dataset-{s}]":
       ("other-reason", "the old dataset copies the preset into the user's workspaces, then refuses to resume its "
                        "shipped rows (collected with seed 0); the seed itself is never range-checked")
       for s in ("1180591620717411303424", "-1", "4294967296")},
    **{L + f"test_accuracy_option_seeds_share_the_range[{v}]":
       ("other-reason", "refused for the accuracy cache's settings (calib_seed differ), not for the seed's range")
       for v in ("-1", "1099511627776")},
    L + "test_finetune_epochs_and_dataset_n_have_the_toml_caps":
        ("other-reason", "fails at its first step on the old finetune's --data 'nowhere' check; the --epochs 10**20, "
                         "build --finetune 10**20 and dataset --n 10**20 steps are never reached"),
    L + "test_an_over_long_init_destination_and_toml_latency_table":
        ("direct", "the 300-character init destination: raw OSError, exit 3; the TOML latency_table step after it "
                   "is not reached on the old code"),
    W + "test_item6_a_config_that_does_not_load_is_never_renamed_into_place":
        ("harness", "the test patches nagkit.app.workspace.set_key, named _set_key in the old code"),
}

EXPLAIN = {
    "direct": "the failure shows the defect",
    "fix-import": "ImportError of the helper that is the fix",
    "fix-import+shim": "ImportError of the fix's constants; the shimmed run shows the behaviour",
    "other-reason": "fails on the old code before reaching the defect",
    "message-only": "the old code refused too; only the wording/stated bound differs",
    "harness": "fails on a name the test patches, not on the defect",
    "control": "passes on the old code (a parameter that was never a defect)",
}


def short(s: str, n: int = 170) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def failure_kind(rec: dict) -> str:
    c = rec.get("crash") or ""
    text = c + "\n" + (rec.get("longrepr") or "")
    code = re.search(r"Result\(code=(\d+)", c) or re.search(r"\(\s*(\d+), ['\"]", c) or re.search(r"Result\(code=(\d+)", text)
    if "TestTimeout" in c or "still running after" in c:
        s = re.search(r"still running after (\d+) s", c)
        s = s.group(1) if s else "?"
        if code and code.group(1) == "3":
            return f"timeout: still running after {s} s inside the command (its catch-all turned the guard into exit 3)"
        return f"timeout: still running after {s} s"
    m = re.search(r"(ImportError|ModuleNotFoundError): ([^\n]*)", c)
    if m:
        return f"{m.group(1)}: {short(m.group(2), 120)}"
    if "DID NOT RAISE" in c:
        return "no error raised (accepted)"
    if "Regex pattern did not match" in c:
        m = re.search(r"Actual message: (.*)", c, re.S)
        return "refused with another message: " + short(m.group(1) if m else c, 140)
    if c.startswith("Failed: an entry was extracted"):
        return "a zip entry was extracted before any refusal"
    m = re.match(r"(\w+Error): (.*)", c, re.S)
    if m and m.group(1) != "AssertionError":
        return f"raw {m.group(1)} from the tested call: {short(m.group(2), 120)}"
    code = code or re.search(r"assert (\d+) == [02]\b", c)
    err = re.search(r"(?<![A-Za-z])[eE]rror: (?!I/O operation)([^\n\\]*)", text)
    if code:
        n = code.group(1)
        if n == "3":
            t = re.search(r"(?<![A-Za-z])error: (\w+): ([^\n\\]*)", text)
            return (f"exit 3 (internal error), a raw {t.group(1)}: {short(t.group(2), 110)}" if t else
                    "exit 3 (internal error): " + short(err.group(1) if err else "", 120))
        if n == "0":
            return "exit 0: accepted (the test expects a refusal, exit 2)" if "== 2" in c else "exit 0"
        if n == "2":
            return "exit 2, but not the refusal the test wants: " + short(err.group(1) if err else "", 130)
        return f"exit {n}"
    if rec.get("crash_len", 0) > 3000 and c.startswith("AssertionError: error:"):
        return (f"a one-line refusal {rec['crash_len']:,} characters long in the assertion "
                "(the value echoed whole): " + short(c.removeprefix("AssertionError: "), 90))
    return "assertion failed: " + short(c.removeprefix("AssertionError: "), 170)


def load(path: Path) -> tuple[dict, dict, dict]:
    tests, collect, session = {}, {}, {}
    if not path.exists():
        return tests, collect, session
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "test":
            prev = tests.get(r["nodeid"])
            if prev is None or r["outcome"] == "failed":
                tests[r["nodeid"]] = r
        elif r["kind"] == "collect":
            collect[r["nodeid"]] = r
        else:
            session = r
    return tests, collect, session


def expand(prefix: str, ids: list[str]) -> list[str]:
    return [i for i in ids if i == prefix or i.startswith(prefix + "[")]


def outcome(tests: dict, collect: dict, nodeid: str) -> dict | None:
    r = tests.get(nodeid)
    if r is None:
        mod = nodeid.split("::")[0]
        if mod in collect:
            m = re.search(r"E\s+((?:Import|ModuleNotFound)Error: [^\n]*)", collect[mod]["longrepr"])
            return {"outcome": "error", "failure_kind": "collection " + short(m.group(1) if m else collect[mod]["longrepr"][-200:], 150)}
        return None
    d = {"outcome": r["outcome"], "when": r["when"], "duration_s": r["duration_s"]}
    if r["outcome"] == "failed":
        d["failure_kind"] = failure_kind(r)
        d["crash_excerpt"] = short(r.get("crash") or "", 400)
    if r["outcome"] == "skipped":
        d["skip"] = r.get("skip")
    return d


def evidence(item: str, nodeid: str, prefix: str, old: dict | None, shim: dict | None) -> tuple[str, str]:
    if old is None:
        return "missing", "no result on the old code"
    if old["outcome"] == "passed":
        return "control", ""
    for key in (nodeid, prefix, (prefix, item)):
        if key in REVIEWED:
            cat, note = REVIEWED[key]
            if shim is not None and shim.get("outcome") == "passed":
                return "control", "passes once the constants are defined"
            return cat, note
    fk = old.get("failure_kind", "")
    if "ImportError" in fk or "ModuleNotFoundError" in fk:
        for name, what in FIX_HELPERS.items():
            if name in fk:
                if shim is not None:
                    if shim.get("outcome") == "passed":
                        return "control", f"ImportError of {what}; passes once the constants are defined"
                    return "fix-import+shim", f"ImportError of {what}"
                return "fix-import", f"ImportError of {what}"
        return "import-only", "ImportError of a name that is not the fix: does not count"
    return "direct", ""


def item_summary(rows: list[dict]) -> dict:
    def n(pred):
        return sum(1 for r in rows if pred(r))
    return {
        "tests": len(rows), "failed_on_old": n(lambda r: r["old"] and r["old"]["outcome"] in ("failed", "error")),
        "passed_on_old": n(lambda r: r["old"] and r["old"]["outcome"] == "passed"),
        "passed_on_main": n(lambda r: r["main"] and r["main"]["outcome"] == "passed"),
        "failed_on_old_showing_the_defect": n(lambda r: r["evidence"] in SHOWS),
        "evidence": {c: n(lambda r, c=c: r["evidence"] == c) for c in sorted({r["evidence"] for r in rows})},
    }


def sub_points(items: list[dict]) -> list[dict]:
    rows = {r["nodeid"]: r for i in items for r in i["tests"]}
    out = []
    for iid, what, prefixes in SUB_POINTS:
        ids = [nid for p in prefixes for nid in expand(p, list(rows))]
        shown = [nid for nid in ids if rows[nid]["evidence"] in SHOWS]
        out.append({"item": iid, "sub_point": what, "tests": ids, "failed_on_old_showing_the_defect": len(shown),
                    "passed_on_main": sum(1 for nid in ids if (rows[nid]["main"] or {}).get("outcome") == "passed"),
                    "closed": bool(ids) and len(shown) == len(ids)})
    return out


def finish(result: dict, items: list[dict]) -> None:
    """The fields computed from the rows: the gaps, the sub-points, all_pass_on_main."""
    result["all_pass_on_main"] = all(r["main"] and r["main"]["outcome"] == "passed" for i in items for r in i["tests"])
    result["items_without_a_test_failing_on_the_defect"] = [
        i["item"] for i in items if i["summary"]["failed_on_old_showing_the_defect"] == 0]
    result["sub_points"] = sub_points(items)
    result["items"] = items


def summarize(a) -> None:
    tmp = Path(a.tmp)
    new, new_coll, new_sess = load(tmp / "main.jsonl")
    old, old_coll, old_sess = load(tmp / "old.jsonl")
    shim, _, shim_sess = load(tmp / "old-shim.jsonl")
    runs = json.loads((tmp / "runs.json").read_text())
    all_ids = list(new)
    only = a.only.split() if a.only else None
    items = []
    for iid, sev, title, prefixes in ITEMS:
        rows = []
        for p in prefixes:
            if only is not None and not selected(p, only):
                continue
            ids = [i for i in expand(p, all_ids) if only is None or selected(i, only)]
            if not ids:
                rows.append({"nodeid": p, "main": {"outcome": "not collected on main"}, "old": None})
                continue
            for nid in ids:
                o = outcome(old, old_coll, nid)
                s = outcome(shim, {}, nid) if shim else None
                cat, note = evidence(iid, nid, p, o, s)
                row = {"nodeid": nid, "old": o, "main": outcome(new, new_coll, nid), "evidence": cat}
                if s is not None:
                    row["old_shimmed"] = s
                if note:
                    row["note"] = note
                rows.append(row)
        items.append({"item": iid, "severity": sev, "defect": title, "tests": rows, "summary": item_summary(rows)})
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    run_record = {"old": {**runs.get("old", {}), "nagkit_file": old_sess.get("nagkit_file")},
                  "old_shimmed": ({**runs.get("old-shim", {}), "nagkit_file": shim_sess.get("nagkit_file"),
                                   "shim_injected": shim_sess.get("shim_injected")} if shim_sess else None),
                  "main": {**runs.get("main", {}), "nagkit_file": new_sess.get("nagkit_file")}}
    if only is not None:
        merge(a, items, run_record, now)
        return
    result = {
        "what": "issue 35's adversarial defects: main's tests for them run against the old code (before the fixes) "
                "and against main",
        "old_commit": a.old, "main_commit": a.new, "main_ref": "HEAD of the checkout the script ran from",
        "generated_utc": now,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "method": [
            f"git worktree add --detach <wt> {a.old}; copy from main (git show HEAD:path) only the test files "
            "and their helpers listed in copied_test_files; no source file is copied",
            "pytest -p no:xdist with a watchdog plugin (DEFECTS_TIMEOUT s per test call; SIGUSR1 raises in the test), "
            "PYTHONPATH=<tree>, so `nagkit` is imported from the tree under test (runs.*.nagkit_file)",
            "old: every node id, --continue-on-collection-errors; a module that fails to import on the old code is "
            "run again (old_shimmed) with only the missing constants defined in the old package (values as on "
            "main; shim_injected), so its test bodies run against the old behaviour",
            "main: the same node ids in the checkout itself",
        ],
        "copied_test_files": TEST_FILES,
        "evidence_categories": EXPLAIN,
        "runs": run_record,
        "timeout_s": new_sess.get("timeout_s"),
    }
    finish(result, items)
    write(a.out, result)


def selected(nodeid: str, only: list[str]) -> bool:
    """``nodeid`` (a spec entry or a collected id) is one of ``only``, or a parameter of one, or
    a spec entry one of ``only`` is a parameter of."""
    return any(nodeid == o or nodeid.startswith(o + "[") or o.startswith(nodeid + "[") for o in only)


def merge(a, new_items: list[dict], run_record: dict, now: str) -> None:
    """DEFECTS_ONLY: the rows of this run replace the same node ids' rows of OUT_JSON (or are
    added, in the spec's order); each carries "run": its index in partial_runs."""
    path = Path(a.out)
    if not path.exists():
        sys.exit(f"DEFECTS_ONLY merges into an existing {path}; run the whole list first")
    result = json.loads(path.read_text())
    result.setdefault("partial_runs", [])
    k = len(result["partial_runs"])
    ran = [r["nodeid"] for i in new_items for r in i["tests"]]
    result["partial_runs"].append({
        "run": k, "generated_utc": now, "old_commit": a.old, "main_commit": a.new,
        "main_ref": "HEAD of the checkout the script ran from", "only": a.only.split(), "nodeids": ran,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "copied_test_files": TEST_FILES, "runs": run_record})
    by_item = {i["item"]: i for i in result["items"]}
    for ni in new_items:
        oi = by_item[ni["item"]]
        spec = next(prefixes for iid, _, _, prefixes in ITEMS if iid == ni["item"])
        rows = {r["nodeid"]: r for r in oi["tests"]}
        for r in ni["tests"]:
            rows[r["nodeid"]] = {**r, "run": k}

        def pos(nid: str) -> int:  # the spec entry's place in ITEMS; within one, the old rows' order
            return next((j for j, p in enumerate(spec) if nid == p or nid.startswith(p + "[")), len(spec))
        old_order = {r["nodeid"]: j for j, r in enumerate(oi["tests"])}
        oi["tests"] = sorted(rows.values(), key=lambda r: (pos(r["nodeid"]), old_order.get(r["nodeid"], 10**6)))
        oi["summary"] = item_summary(oi["tests"])
    finish(result, result["items"])
    write(a.out, result)


def write(out: str, result: dict) -> None:
    items = result["items"]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    # a table for the README
    print("| item | tests (node ids) | old | main |\n|---|---|---|---|")
    for i in items:
        s = i["summary"]
        ev = ", ".join(f"{v} {k}" for k, v in s["evidence"].items())
        funcs = sorted({r["nodeid"].split("[")[0] for r in i["tests"]})
        print(f"| {i['item']} | {'<br>'.join(f.replace('tests/', '') for f in funcs)} ({s['tests']} ids) "
              f"| {s['failed_on_old']} failed, {s['passed_on_old']} passed ({ev}) | {s['passed_on_main']}/{s['tests']} passed |")
    print("\n| item | sub-point | tests | shown on old | main |\n|---|---|---|---|---|")
    for sp in result["sub_points"]:
        print(f"| {sp['item']} | {sp['sub_point']} | {len(sp['tests'])} | {sp['failed_on_old_showing_the_defect']} "
              f"| {sp['passed_on_main']}/{len(sp['tests'])} passed |{' closed' if sp['closed'] else ' OPEN'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("files")
    s = sub.add_parser("summarize")
    for k in ("tmp", "old", "new", "out"):
        s.add_argument("--" + k, required=True)
    s.add_argument("--only", default="")
    sub.add_parser("nodes").add_argument("--only", default="")
    a = ap.parse_args()
    if a.cmd == "files":
        print("\n".join(TEST_FILES))
    elif a.cmd == "nodes":
        seen = []
        only = a.only.split() if a.only else None
        if only is not None:  # every one of them must be in the list (a typo would run nothing)
            spec = [p for _, _, _, prefixes in ITEMS for p in prefixes]
            unknown = [o for o in only if not any(selected(o, [p]) or selected(p, [o]) for p in spec)]
            if unknown:
                sys.exit("DEFECTS_ONLY: not in the list of issue 35's tests: " + " ".join(unknown))
            seen = list(dict.fromkeys(only))
        else:
            for _, _, _, prefixes in ITEMS:
                for p in prefixes:
                    if p not in seen:
                        seen.append(p)
        print("\n".join(seen))
    else:
        summarize(a)


if __name__ == "__main__":
    main()
SPEC

git -C "$repo" worktree add --detach "$wt" "$old_sha" >/dev/null
for f in $("$py" "$tmp/spec.py" files); do
  mkdir -p "$(dirname "$wt/$f")"
  git -C "$repo" show "HEAD:$f" > "$wt/$f"
done
echo "old tree $wt at $old_sha; copied: $(git -C "$wt" status --short | tr '\n' ' ')" >&2
only=${DEFECTS_ONLY:-}
mapfile -t nodes < <("$py" "$tmp/spec.py" nodes --only "$only")
[ ${#nodes[@]} -gt 0 ] || { echo "no node ids to run" >&2; exit 2; }

echo '{}' > "$tmp/runs.json"
run() {  # label tree shim node...
  local label=$1 tree=$2 shim=$3; shift 3
  local t0 rc=0; t0=$(date +%s)
  ( cd "$tree" && env PYTHONPATH="$tree:$tmp" DEFECTS_LOG="$tmp/$label.jsonl" DEFECTS_SHIM="$shim" \
      DEFECTS_TIMEOUT="$limit" NAGKIT_JOBS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
      timeout 3600 "$py" -m pytest -p no:xdist -p no:cacheprovider -p defects_plugin -q -rN \
      --continue-on-collection-errors "$@" ) > "$tmp/$label.out" 2>&1 || rc=$?
  "$py" - "$tmp/runs.json" "$label" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -n 1 "$tmp/$label.out")" <<'PY'
import json, sys
p, label, rc, wall, last = sys.argv[1:]
d = json.load(open(p)); d[label] = {"pytest_rc": int(rc), "wall_s": int(wall), "pytest_summary": last.strip("= ")}
json.dump(d, open(p, "w"))
PY
  echo "$label: $(tail -n 1 "$tmp/$label.out") (rc $rc)" >&2
}

# Which test modules import on the old code at all (a node id in one that does not would stop
# pytest with "found no collectors"): those are run as whole modules, to record the error.
mapfile -t modules < <(printf '%s\n' "${nodes[@]}" | sed 's/::.*//' | sort -u)
( cd "$wt" && env PYTHONPATH="$wt:$tmp" DEFECTS_LOG="$tmp/old-collect.jsonl" "$py" -m pytest -p no:xdist \
    -p no:cacheprovider -p defects_plugin -q --collect-only --continue-on-collection-errors "${modules[@]}" \
    > "$tmp/old-collect.out" 2>&1 ) || true
mapfile -t broken < <("$py" -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "collect":
        print(r["nodeid"])' "$tmp/old-collect.jsonl")
old_nodes=() shim_nodes=()
for n in "${nodes[@]}"; do
  mod=${n%%::*}
  if printf '%s\n' "${broken[@]}" | grep -qxF -- "$mod"; then shim_nodes+=("$n"); else old_nodes+=("$n"); fi
done
run old "$wt" 0 "${old_nodes[@]}" "${broken[@]}"
# the modules that did not import on the old code, again with only the fix's constants defined
[ ${#shim_nodes[@]} -gt 0 ] && run old-shim "$wt" 1 "${shim_nodes[@]}"
run main "$repo" 0 "${nodes[@]}"

"$py" "$tmp/spec.py" summarize --tmp "$tmp" --old "$old_sha" --new "$new_sha" --out "$out" --only "$only"
echo "wrote $out" >&2
