"""A pytest plugin for `time_suite.sh`: each test's CPU seconds (its process, plus the children it
waited for) and wall seconds, one JSON line per test, in $CPUTIME_OUT/<pid>.jsonl.

CPU time is the figure that survives a shared machine: the wall time of a test grows with the other
jobs' load, its CPU time much less. Not part of the suite; load it with `-p cputime_plugin`.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

OUT = os.environ.get("CPUTIME_OUT", "suite-cputime")


def _cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    (s0, c0), w0 = _cpu(), time.time()
    yield
    (s1, c1), w1 = _cpu(), time.time()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{os.getpid()}.jsonl"), "a") as fh:
        fh.write(json.dumps({"id": item.nodeid, "self": s1 - s0, "children": c1 - c0, "wall": w1 - w0,
                             "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "end": w1}) + "\n")
