"""`flashsim` on a POSIX pseudo-terminal of a given size: send keys, read the screen a marker shows up on."""

import os
import re
import select
import signal
import subprocess
import sys
import time


def foreground():
    """In the child before exec: SIGINT to its default, as a terminal's foreground job has it (a test run as a shell's
    background job, `.ci/run &`, starts with SIGINT ignored, and every child would keep that: Ctrl-C never arrives)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """A `flashsim` process on a pseudo-terminal of `rows` × `columns`."""

    def __init__(self, *args: str, rows: int = 40, columns: int = 120):
        import fcntl
        import struct
        import termios

        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm-256color"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sim.cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            preexec_fn=foreground,
        )
        os.close(slave)

    def after(self, keys: bytes, marker: bytes, end: bytes = b"q quit") -> str:
        """Send `keys`; the screen text from `marker` on, read until `end` follows it (escape codes removed)."""
        os.write(self.master, keys)
        seen, deadline = b"", time.monotonic() + 20
        while time.monotonic() < deadline and not (marker in seen and seen.rfind(end) > seen.find(marker)):
            if select.select([self.master], [], [], 0.1)[0]:
                seen += os.read(self.master, 1 << 16)
        assert marker in seen, seen[-2000:]
        return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", seen[seen.find(marker) :].decode(errors="replace"))

    def quit(self) -> int:
        """Press q; the exit code."""
        os.write(self.master, b"q")
        return self.proc.wait(timeout=20)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        os.close(self.master)
