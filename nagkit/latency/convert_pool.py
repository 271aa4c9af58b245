"""Conversions in worker processes, results as they finish.

:class:`ConversionPool` starts ``jobs`` processes of :mod:`nagkit.latency.convert_worker`
(``python -m``, not multiprocessing: a user's script that calls ``nagkit.profile()`` at top
level needs no ``__main__`` guard), hands them tasks one at a time and yields each finished
model's path as soon as it is written. The profiler measures on a phone while the host converts;
``convert_many`` waits for all. A failed conversion raises :class:`ConversionError` quoting the
worker's message; the remaining workers are stopped.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from nagkit.runtimes.convert import ConversionError

log = logging.getLogger(__name__)

_DONE = object()


class ConversionPool:
    """``with ConversionPool(tasks, jobs) as pool: for path in pool: ...``"""

    def __init__(self, tasks: list[tuple], jobs: int):
        self.tasks = list(tasks)
        self.jobs = max(1, min(int(jobs), len(self.tasks))) if self.tasks else 0
        self._next = 0
        self._lock = threading.Lock()
        self._results: queue.Queue = queue.Queue()
        self._procs: list[subprocess.Popen] = []
        self._errs: list = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def __enter__(self) -> ConversionPool:
        env = dict(os.environ)
        pkg_root = str(Path(__file__).resolve().parents[2])  # the nagkit this process imported
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        for _ in range(self.jobs):
            err = tempfile.TemporaryFile(mode="w+b", prefix="nagkit-convert-", suffix=".log")
            proc = subprocess.Popen([sys.executable, "-m", "nagkit.latency.convert_worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, env=env, text=True, bufsize=1, close_fds=True)
            self._procs.append(proc)
            self._errs.append(err)
            t = threading.Thread(target=self._feed, args=(proc, err), daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def _take(self) -> tuple[int, tuple] | None:
        with self._lock:
            if self._stop.is_set() or self._next >= len(self.tasks):
                return None
            i = self._next
            self._next += 1
            return i, self.tasks[i]

    def _feed(self, proc: subprocess.Popen, err) -> None:
        """One worker's loop: send a task, wait for its answer, report it; until none is left."""
        try:
            while (item := self._take()) is not None:
                i, task = item
                proc.stdin.write(json.dumps({"id": i, "task": list(task)}) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise ConversionError(f"a conversion worker died converting {Path(task[3]).name}"
                                          f"{_tail(err)}")
                reply = json.loads(line)
                if not reply.get("ok"):
                    raise ConversionError(f"conversion of {Path(task[3]).name} failed: {reply.get('error')}")
                self._results.put(reply["path"])
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
            self._results.put(e)
        finally:
            self._results.put(_DONE)

    def __iter__(self) -> Iterator[str]:
        running = self.jobs
        while running:
            item = self._results.get()
            if item is _DONE:
                running -= 1
                continue
            if isinstance(item, BaseException):
                self._stop.set()
                raise item
            yield item

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        for proc in self._procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=2 if exc[0] is None else 0.1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for err in self._errs:
            err.close()
        return False


def _tail(err, n: int = 1500) -> str:
    try:
        err.flush()
        err.seek(0, os.SEEK_END)
        size = err.tell()
        err.seek(max(0, size - n))
        text = err.read().decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return ""
    return f"; its last output:\n{text}" if text else ""
