"""The trace viewer: record or load a trace, step through it with the keyboard, play it, export it.

Keys are read with the standard library only: termios/tty where there are (POSIX),
else one command per line of input.
"""

import io
import os
import select
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console, RenderableType

from sim import reference
from sim.api import backward, run
from sim.dtypes import DTYPES
from sim.errors import InputError
from sim.trace import Trace
from sim.viz.listing import STEPS_LISTED
from sim.viz.screen import KEYS, screen
from sim.viz.timeline import Timeline

try:
    import termios
    import tty
except ImportError:  # not POSIX: the viewer reads one command per line
    termios = tty = None

SMALL = 16  # runs with N, Nk and d all at most this record every value; bigger ones only one row's, with `row`
ESCAPES = {
    b"[C": "right", b"OC": "right", b"[D": "left", b"OD": "left", b"[B": "down", b"[A": "up",
    b"[H": "home", b"OH": "home", b"[1~": "home", b"[F": "end", b"OF": "end", b"[4~": "end",
    b"[6~": "pagedown", b"[5~": "pageup",
}  # fmt: skip
LINE_KEYS = "enter: next · p: previous · t/T: next/previous tile · a number: jump to that step · q: quit"


def _mode(q, k, row: int | None) -> str:
    """What a trace records: every value of a small run, one row's with `row`, else steps only."""
    return "values" if row is not None or max(q.shape[0], k.shape[0], q.shape[1]) <= SMALL else "steps"


def record(algorithm: str, q, k, v, *, row: int | None = None, **options) -> Trace:
    """Run `algorithm` and keep its trace: every value for small runs, one query row's with `row`, else none."""
    return run(algorithm, q, k, v, record=_mode(q, k, row), row=row, **options).trace


def record_backward(algorithm: str, q, k, v, *, row: int | None = None, **options) -> Trace:
    """The backward pass's trace, as `record`; O and L from the float64 reference, dO seeded random."""
    o, lse = reference.attention(q, k, v, causal=options.get("causal", False), scale=options.get("scale"))
    do = np.random.default_rng(1).standard_normal(q.shape).astype(q.dtype)
    return backward(algorithm, q, k, v, o.astype(q.dtype), lse, do, record=_mode(q, k, row), row=row, **options).trace


def bench_open(
    algorithms=("flash1", "flash2", "standard"), *, n=4096, d=64, dtype="fp16", hardware="A100-40GB", keys=50
) -> list[dict]:
    """Per algorithm on an n × n run: seconds to record the trace and draw its first screen (120 × 45),
    and the mean seconds per key press (`→`, a new screen each) after that."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)).astype(DTYPES[dtype]) for _ in range(3))
    console = Console(file=io.StringIO(), width=120, height=45, force_terminal=True)
    rows = []
    for algorithm in algorithms:
        start = time.perf_counter()
        trace = record(algorithm, q, k, v, hardware=hardware)
        recorded = time.perf_counter()
        view = Timeline(trace)
        console.print(screen(view, 0, KEYS, height=45))
        opened = time.perf_counter()
        viewer = Viewer(view)
        for _ in range(keys):
            viewer.press("right")
            console.print(screen(view, viewer.k, viewer.footer, height=45))
        rows.append(
            {
                "algorithm": algorithm, "n": n, "d": d, "dtype": dtype, "hardware": hardware, "steps": len(view),
                "record_s": recorded - start, "open_s": opened - start,
                "per_key_s": (time.perf_counter() - opened) / keys,
            }
        )  # fmt: skip
    return rows


def load(path: str | Path, row: int | None = None) -> Trace:
    """A trace saved with `Trace.save`, cut down to one query row's values with `row`."""
    trace = Trace.load(path)
    if row is None:
        return trace
    n = trace.config["n"]
    if not 0 <= row < n:
        raise InputError(f"row: {row} is outside the matrix; query rows are 0 … {n - 1} (N = {n})")
    return trace.only_row(row)


def check_step(timeline: Timeline, k: int | None) -> None:
    """Refuse a step number the trace does not have."""
    if k is not None and not 0 <= k < len(timeline):
        raise InputError(f"step: {k} is out of range; this trace has steps 0 … {len(timeline) - 1}")


def export(renderable: RenderableType, path: str | Path, kind: str, width: int, title: str) -> None:
    """Write a renderable as an SVG picture or an HTML page (rich's console export)."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    console.print(renderable)
    try:
        if kind == "svg":
            console.save_svg(str(path), title=title)
        else:
            console.save_html(str(path))
    except OSError as e:
        raise InputError(f"--{kind}: cannot write {str(path)!r}: {e.strerror}") from None


class Viewer:
    """Where the reader is in a trace and what each key does (no terminal input or output here)."""

    def __init__(self, timeline: Timeline, k: int = 0):
        self.timeline, self.k = timeline, k
        self.typed: str | None = None  # the digits typed after `g`, while jumping
        self.message = ""

    @property
    def footer(self) -> str:
        """The keys, or the step number being typed, or what went wrong."""
        if self.typed is not None:
            return f"go to step: {self.typed}▏  (enter: go · esc: cancel)"
        return f"{self.message}  ·  {KEYS}" if self.message else KEYS

    def press(self, key: str) -> bool:
        """Act on a key ("right", "left", "home", "end", "enter", "backspace", "escape" or a character); False: quit."""
        last = len(self.timeline) - 1
        self.message = ""
        if self.typed is not None:
            if key.isdigit():
                self.typed += key
            elif key == "backspace":
                self.typed = self.typed[:-1]
            elif key == "enter" and self.typed:
                self.jump(int(self.typed))
            elif key in ("escape", "enter", "q"):
                self.typed = None
            return True
        if key in ("right", "down", "n", "l", " ", "enter"):
            self.k = min(self.k + 1, last)
        elif key in ("left", "up", "p", "h", "b"):
            self.k = max(self.k - 1, 0)
        elif key in ("t", "pagedown"):
            self.k = self.timeline.next_tile(self.k)
        elif key in ("T", "pageup"):
            self.k = self.timeline.previous_tile(self.k)
        elif key == "home":
            self.k = 0
        elif key in ("end", "G"):
            self.k = last
        elif key == "g":
            self.typed = ""
        elif key in ("q", "Q"):
            return False
        return True

    def jump(self, k: int) -> None:
        """Go to step k, or say why not."""
        self.typed = None
        if 0 <= k < len(self.timeline):
            self.k = k
        else:
            self.message = f"no step {k}: this trace has steps 0 … {len(self.timeline) - 1}"


def read_key(fd: int) -> str:
    """One key press from a terminal in cbreak mode, escape sequences named ("right", "home", …)."""
    ch = os.read(fd, 1)
    if ch == b"\x1b":
        seq = b""
        while select.select([fd], [], [], 0.03)[0]:
            seq += os.read(fd, 1)
            if seq[-1:].isalpha() or seq.endswith(b"~"):
                break
        return ESCAPES.get(seq, "escape")
    if ch in (b"\r", b"\n"):
        return "enter"
    if ch in (b"\x7f", b"\x08"):
        return "backspace"
    if ch in (b"\x03", b"\x04", b""):
        return "q"
    return ch.decode(errors="ignore")


def interact(timeline: Timeline, console: Console) -> None:
    """Step through the trace in the terminal until `q`."""
    viewer = Viewer(timeline)
    if termios is None:
        return _interact_by_lines(viewer, console)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        with console.screen(hide_cursor=True) as live:
            while True:
                live.update(screen(timeline, viewer.k, viewer.footer, height=console.height))
                if not viewer.press(read_key(fd)):
                    break
    except KeyboardInterrupt:
        pass
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _interact_by_lines(viewer: Viewer, console: Console) -> None:
    """Without termios: one command per line (enter, p, t, T, a step number, q)."""
    while True:
        console.print(
            screen(viewer.timeline, viewer.k, f"{viewer.message}  ·  {LINE_KEYS}" if viewer.message else LINE_KEYS)
        )
        try:
            line = input("> ").strip()
        except (EOFError, KeyboardInterrupt):
            return
        if line.isdigit():
            viewer.jump(int(line))
        elif not viewer.press(line or "enter"):
            return


def frames(timeline: Timeline) -> list[int]:
    """The steps `play` shows: every step of a small run, the last step of each tile pair of a big one."""
    if len(timeline) <= STEPS_LISTED:
        return list(range(len(timeline)))
    return [last for _, last in timeline.tile_groups()]


def play(timeline: Timeline, console: Console, delay: float) -> None:
    """Animate the trace in the terminal, `delay` seconds a frame; `q` stops. The last frame stays on screen."""
    shown = 0
    keys = _Keys()
    try:
        with keys, console.screen(hide_cursor=True) as live:
            for shown in frames(timeline):
                live.update(
                    screen(timeline, shown, f"playing step {shown} of {len(timeline) - 1} · q: stop", console.height)
                )
                if keys.pressed(delay) in ("q", "Q"):
                    break
    except KeyboardInterrupt:
        pass
    console.print(screen(timeline, shown))


class _Keys:
    """Keys pressed while playing (none where stdin is not a terminal or there is no termios)."""

    def __enter__(self):
        self.fd, self.saved = None, None
        if termios is not None and sys.stdin.isatty():
            self.fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        return False

    def pressed(self, wait: float) -> str | None:
        """The key pressed within `wait` seconds, if any."""
        if self.fd is None:
            time.sleep(wait)
            return None
        return read_key(self.fd) if select.select([self.fd], [], [], wait)[0] else None
