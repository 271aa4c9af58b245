"""The query journal: every accuracy a training paid for, kept (docs/decisions.md 37).

``queries.jsonl`` in a workspace. Line 1 is a header (``{"nagkit_queries": 1, "space": ...,
"accuracy_source": {...}}``); every further line is one queried arch ``{"arch", "accuracy",
"table"}``, ``table`` naming (by sha256 prefix) the latency table the training that paid for it
was for. Accuracy does not depend on the latency table, so the journal is carried along when a
workspace is re-targeted (``nagkit init --from W --latency-table T``), and a training for T
starts from every accuracy already paid for.

Rows are appended as each batch of queries returns (written, flushed, fsynced) by
:class:`JournaledSource`, before the search sees them: a training stopped by a failing source, a
kill or a crash loses no paid-for query, and a rerun starts from all of them (and spends only
what its query budget has left). A torn last line (a kill mid-write) is cut off on opening.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace

FORMAT_VERSION = 1
MAX_JOURNAL_BYTES = 1 << 30


@dataclass
class JournalRows:
    archs: list[Arch]
    accuracy: np.ndarray
    tables: list[str]
    outside: int = 0  # rows whose arch lies outside this space (a workspace narrowed to fewer resolutions)

    def __len__(self) -> int:
        return len(self.archs)

    def paid_for(self, table: str) -> int:
        return sum(t == table for t in self.tables)


def table_tag(table_prov: dict[str, Any]) -> str:
    """The tag of a latency table in the journal: its sha256's first 16 digits (or its spec)."""
    sha = table_prov.get("sha256")
    return str(sha)[:16] if sha else str(table_prov.get("spec", "unknown"))


class QueryJournal:
    """``queries.jsonl`` of one workspace, for one space and accuracy source."""

    def __init__(self, path: str | Path, space: SearchSpace, source_prov: dict[str, Any]):
        self.path, self.space = Path(path), space
        self.header = {"nagkit_queries": FORMAT_VERSION, "space": space.name,
                       "accuracy_source": {k: v for k, v in source_prov.items() if k != "path"}}

    def read(self) -> JournalRows:
        """Every row (none when there is no file); a torn last line is cut off first."""
        if not self.path.exists():
            return JournalRows([], np.zeros(0), [])
        if not self.path.is_file():
            raise ArtifactError(f"query journal {str(self.path)!r} is not a regular file")
        if self.path.stat().st_size > MAX_JOURNAL_BYTES:
            raise ArtifactError(f"query journal {str(self.path)!r} is over {MAX_JOURNAL_BYTES >> 20} MiB")
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            with open(self.path, "r+b") as f:
                f.truncate(cut)
            raw = raw[:cut]
        lines = raw.decode("utf-8", errors="replace").splitlines()
        if not lines:
            return JournalRows([], np.zeros(0), [])
        try:
            head = json.loads(lines[0])
        except json.JSONDecodeError:
            head = None
        if not isinstance(head, dict) or head.get("nagkit_queries") != FORMAT_VERSION:
            raise ArtifactError(f"{str(self.path)!r} is not a nagkit query journal",
                                hint="move it away; `nagkit train` starts a new one")
        if head.get("space") != self.space.name or head.get("accuracy_source") != self.header["accuracy_source"]:
            raise ArtifactError(
                f"query journal {str(self.path)!r} holds accuracies of space {head.get('space')!r} from "
                f"{(head.get('accuracy_source') or {}).get('spec')!r}, not of this workspace's "
                f"{self.space.name!r} from {self.header['accuracy_source'].get('spec')!r}",
                hint="move it away (its accuracies cannot be used here), then rerun `nagkit train`")
        archs, acc, tables, outside = [], [], [], 0
        for ln, line in enumerate(lines[1:], start=2):
            try:
                row = json.loads(line)
                a = Arch.from_string(row["arch"])
                c = float(row["accuracy"])
                if not 0.0 <= c <= 1.0:
                    raise ValueError(f"accuracy {c} is not a fraction")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise ArtifactError(f"query journal {str(self.path)!r} line {ln} is corrupt ({str(e)[:80]})",
                                    hint="move it away; `nagkit train` starts a new one") from None
            try:
                a = self.space.validate(a)
            except BadInputError:
                outside += 1
                continue
            archs.append(a)
            acc.append(c)
            tables.append(str(row.get("table", "")))
        return JournalRows(archs, np.asarray(acc, dtype=np.float64), tables, outside)

    def append(self, archs: list[Arch], accuracy: np.ndarray, table: str) -> None:
        """Append rows (the header first on a new file); flushed and fsynced before returning."""
        new = not self.path.exists() or self.path.stat().st_size == 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(self.header)] if new else []
        lines += [json.dumps({"arch": str(a), "accuracy": round(float(c), 8), "table": table})
                  for a, c in zip(archs, accuracy)]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())


class JournaledSource:
    """An accuracy source whose every answered batch is journaled before it is returned. Counts
    ``queries`` like the source; ``evaluate_decisions`` and ``evaluate`` as the source's."""

    def __init__(self, source, journal: QueryJournal, table: str):
        self.source, self.journal, self.table = source, journal, table
        self.name, self.spec = source.name, source.spec
        self.expensive = getattr(source, "expensive", False)

    @property
    def queries(self) -> int:
        return self.source.queries

    def provenance(self) -> dict[str, Any]:
        return self.source.provenance()

    def evaluate_decisions(self, dec) -> np.ndarray:
        acc = self.source.evaluate_decisions(dec)
        self.journal.append(dec.to_archs(self.source.space), acc, self.table)
        return acc

    def evaluate(self, archs) -> np.ndarray:
        archs = list(archs)
        acc = self.source.evaluate(archs)
        self.journal.append(archs, acc, self.table)
        return acc
