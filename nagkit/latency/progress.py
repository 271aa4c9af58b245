"""A rich progress bar with ETA on stderr, or nothing when disabled."""

from __future__ import annotations


class progress_bar:
    """A rich progress bar with ETA on stderr (or nothing)."""

    def __init__(self, enabled: bool, total: int, done: int, label: str, verb: str = "profile"):
        self.enabled, self.total, self.done, self.label, self.verb = enabled, total, done, label, verb

    def __enter__(self):
        if not self.enabled:
            return lambda key: None
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._p = Progress(TextColumn(f"[bold]{self.verb}[/] {{task.description}}"), BarColumn(),
                           MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                           TimeRemainingColumn(), TextColumn("{task.fields[key]}"),
                           console=Console(stderr=True), transient=False)
        self._p.__enter__()
        self._task = self._p.add_task(str(self.label), total=self.total, completed=self.done, key="")

        def advance(key: str) -> None:
            self._p.update(self._task, advance=1, key=key[:60])

        return advance

    def __exit__(self, *exc):
        if self.enabled:
            self._p.__exit__(*exc)
        return False
