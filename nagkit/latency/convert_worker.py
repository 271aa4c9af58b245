"""``python -m nagkit.latency.convert_worker``: one conversion process of a
:class:`~nagkit.latency.convert_pool.ConversionPool`.

It reads one JSON task per line on stdin (``{"id": N, "task": [...]}``, a task of
:func:`nagkit.latency.blocks.convert_task`) and answers one JSON line per task on its own copy
of stdout (``{"id": N, "ok": true, "path": ...}`` or ``{"id": N, "ok": false, "error": ...}``);
file descriptor 1 points at stderr, so nothing a converter prints can garble the answers. It
exits at the end of its input. Started with ``-m`` (never through multiprocessing), it imports
nothing of the parent's ``__main__``: a user's script needs no ``if __name__ == "__main__"``.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # converters' native output goes to stderr
    sys.stdout = sys.stderr
    from nagkit.latency.blocks import convert_task

    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            path = convert_task(tuple(req["task"]))
            reply = {"id": req["id"], "ok": True, "path": path}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
            from nagkit.errors import NagkitError

            msg = e.message if isinstance(e, NagkitError) else f"{type(e).__name__}: {e}"
            reply = {"id": req["id"], "ok": False, "error": msg[-4000:]}
        answers.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
