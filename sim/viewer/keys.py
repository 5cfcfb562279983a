"""The viewer's keys: reading one from a terminal, and what each does to the reader's place in a trace."""

import os
import select

from sim.viz.screen import KEYS
from sim.viz.timeline import Timeline

ESCAPES = {
    b"[C": "right", b"OC": "right", b"[D": "left", b"OD": "left", b"[B": "down", b"[A": "up",
    b"[H": "home", b"OH": "home", b"[1~": "home", b"[F": "end", b"OF": "end", b"[4~": "end",
    b"[6~": "pagedown", b"[5~": "pageup",
}  # fmt: skip


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
            if key.isdigit():  # no leading zeros, and one digit more than the last step's at most: enough to say
                typed = (self.typed + key).lstrip("0") or "0"  # "no step …" (5,000 of them overflowed int())
                self.typed = typed if len(typed) <= len(str(last)) + 1 else self.typed
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
