"""The one signal and terminal guard of every flashsim command: SIGTERM and SIGHUP unwind the command like Ctrl-C
does (so the viewer's alternate screen, cbreak mode and hidden cursor, and a progress bar, are put back), and
SIGWINCH marks the terminal resized for the viewer to redraw.

Exit codes (`flashsim --help`): 130 after Ctrl-C, 128 + the signal's number after SIGTERM (143) or SIGHUP (129).
"""

import signal
import threading
from contextlib import contextmanager

RESIZED = threading.Event()  # set on SIGWINCH; the viewer clears it when it redraws


class Terminated(Exception):
    """The process was sent SIGTERM or SIGHUP: unwind, then exit with 128 + `signum`."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame):
    raise Terminated(signum)


@contextmanager
def guarded():
    """Install the handlers for the duration of a command (in the main thread only; elsewhere, as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = {getattr(signal, name): handler for name, handler in
              (("SIGTERM", _raise), ("SIGHUP", _raise), ("SIGWINCH", lambda s, f: RESIZED.set())) if hasattr(signal, name)}  # fmt: skip
    saved = {s: signal.signal(s, handler) for s, handler in wanted.items()}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
