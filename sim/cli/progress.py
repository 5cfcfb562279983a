"""A progress bar for work that runs longer than ~2 s: a rich.progress bar on stderr, off with --quiet and when
stdout is not a terminal.

A simulated pass reports the HBM bytes its chips have booked so far against the closed form's total
(`sim.api.heads.WATCHERS` tells of each new chip; a thread reads its ledger); other work advances by hand.
"""

import sys
import threading
import time
from contextlib import contextmanager
from types import SimpleNamespace

from rich.console import Console

from sim.api import heads

DELAY = 2.0  # seconds before the bar appears: shorter work shows none
TICK = 0.1


class Work:
    """The progress of one command's work, in tasks; shown after `DELAY` seconds, if it is shown at all."""

    def __init__(self, quiet: bool = False, console: Console | None = None):
        self.shown = not quiet and sys.stdout.isatty()
        self.bar = _bar(console or Console(stderr=True)) if self.shown else _Hidden()
        self._probes: dict = {}  # task → a function returning its completed amount now
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self) -> "Work":
        if self.shown:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar.live.is_started:
            self.bar.stop()

    def _poll(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(TICK):
            if time.monotonic() - start >= DELAY:
                self.draw()

    def print(self, console: Console, *objects, **kwargs) -> None:
        """Print on `console`; above the bar while it is drawn (lines of another console would run into it)."""
        (self.bar.console if self.bar.live.is_started else console).print(*objects, **kwargs)

    def draw(self) -> None:
        """Show the bar (from its first call on) with each task's progress now."""
        if not self.bar.live.is_started:
            self.bar.start()
        for task, probe in list(self._probes.items()):
            self.bar.update(task, completed=probe())
        self.bar.refresh()

    @contextmanager
    def simulating(self, description: str, total_bytes: int):
        """A simulated pass: complete when its chips have booked `total_bytes` of HBM traffic (the closed form)."""
        seen = {"chip": None, "before": 0}  # the chip at work, and the bytes of those done (not kept alive)

        def watch(chip) -> None:
            if seen["chip"] is not None:
                seen["before"] += _moved(seen["chip"])
            seen["chip"] = chip

        def probe() -> int:
            chip = seen["chip"]
            return seen["before"] + (0 if chip is None else _moved(chip))

        task = self.bar.add_task(description, total=max(1, total_bytes))
        self._probes[task] = probe
        heads.WATCHERS.append(watch)
        try:
            yield
        finally:
            heads.WATCHERS.remove(watch)
            del self._probes[task]
            self.bar.update(task, completed=max(1, total_bytes))

    @contextmanager
    def running(self, description: str):
        """Work with no units to count: a bar that pulses until it is done."""
        task = self.bar.add_task(description, total=None)
        try:
            yield
        finally:
            self.bar.update(task, total=1, completed=1)

    @contextmanager
    def steps(self, description: str, total: int):
        """Work done in `total` units: yields `advance(units)`."""
        task = self.bar.add_task(description, total=max(1, total))
        done = [0]

        def advance(units: int = 1) -> None:
            done[0] += units

        self._probes[task] = lambda: done[0]
        try:
            yield advance
        finally:
            del self._probes[task]
            self.bar.update(task, completed=max(1, total))


def _moved(chip) -> int:
    return chip.ledger.hbm_read_bytes + chip.ledger.hbm_write_bytes


def _bar(console: Console):
    """The rich.progress bar (imported here: a command whose bar cannot show never loads it)."""
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=console, transient=True, auto_refresh=False,
    )  # fmt: skip


class _Hidden:
    """The bar of work that shows none (--quiet, or stdout not a terminal): tasks are numbered, nothing is drawn."""

    live = SimpleNamespace(is_started=False)

    def __init__(self):
        self.tasks = 0

    def add_task(self, description: str, total) -> int:
        self.tasks += 1
        return self.tasks

    def update(self, task: int, **fields) -> None:
        pass
