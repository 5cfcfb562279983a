"""The viewer in a terminal: step through a trace key by key, or play it.

Keys are read with the standard library only: termios/tty where there are (POSIX),
else one command per line of input.
"""

import select
import sys
import time

from rich.console import Console, Group, RenderableType
from rich.text import Text

from sim.viewer import guard
from sim.viewer.keys import Viewer, read_key
from sim.viz.listing import STEPS_LISTED
from sim.viz.screen import screen
from sim.viz.timeline import Timeline

try:
    import termios
    import tty
except ImportError:  # not POSIX: the viewer reads one command per line
    termios = tty = None

LINE_KEYS = "enter: next · p: previous · t/T: next/previous tile · a number: jump to that step · q: quit"


INTRO_KEYS = "any key: the first step · q: quit"
MIN_WIDTH, MIN_HEIGHT = 72, 20  # the smallest terminal whose screen shows every panel (side by side)
RESIZE_POLL = 0.1  # seconds between looks at whether the terminal was resized, while waiting for a key


def interact(timeline: Timeline, console: Console, intro: RenderableType | None = None) -> None:
    """Step through the trace in the terminal until `q`, redrawing when the terminal is resized; `intro`, if
    given, is the first screen (what the run is). Ctrl-C, SIGTERM and SIGHUP put the terminal back and go on up
    (`sim.viewer.guard`)."""
    viewer = Viewer(timeline)
    if termios is None:
        return _interact_by_lines(viewer, console, intro)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        with console.screen(hide_cursor=True) as live:
            if intro is not None:
                key = "resize"
                while key == "resize":
                    live.update(Group(intro, Text(INTRO_KEYS, style="dim")))
                    key = next_key(fd)
                if key in ("q", "Q"):
                    return
            while True:
                live.update(_fitted(console, screen(timeline, viewer.k, viewer.footer, height=console.height)))
                key = next_key(fd)
                if key != "resize" and not viewer.press(key):
                    break
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def next_key(fd: int) -> str:
    """The next key pressed, or "resize" when the terminal changed size first (SIGWINCH, `sim.viewer.guard`)."""
    while not select.select([fd], [], [], RESIZE_POLL)[0]:
        if guard.RESIZED.is_set():
            guard.RESIZED.clear()
            return "resize"
    return read_key(fd)


def _fitted(console: Console, shown: RenderableType) -> RenderableType:
    """`shown`, or where the terminal is smaller than the viewer needs, what to do about it."""
    width, height = console.size
    if width >= MIN_WIDTH and height >= MIN_HEIGHT:
        return shown
    return Text(
        f"The viewer needs {MIN_WIDTH} × {MIN_HEIGHT}; this terminal is {width} × {height}.\n"
        "Make it larger (the screen redraws), or press q and print the listing: flashsim trace … | less",
        style="bold",
    )


def _interact_by_lines(viewer: Viewer, console: Console, intro: RenderableType | None = None) -> None:
    """Without termios: one command per line (enter, p, t, T, a step number, q)."""
    if intro is not None:
        console.print(intro)
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
    with keys, console.screen(hide_cursor=True) as live:
        for shown in frames(timeline):
            live.update(
                screen(timeline, shown, f"playing step {shown} · {len(timeline)} steps · q: stop", console.height)
            )
            if keys.pressed(delay) in ("q", "Q"):
                break
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
