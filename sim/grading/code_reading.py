"""The batch's submissions read for the similarity report by a child process, one file at a time under a deadline.

Reading a file means decoding it in the codec it names (`similarity.source_text`: punycode is quadratic), then
Python's tokenizer and parser (`similarity.runs`, `similarity.builds_code`), which hold the GIL:
a 1 MiB f-string took 111 s to parse in Python 3.11, and in the grader's own process that would stall every grading
thread (red team 84). The child is the project's own code; it reads each source from its stdin, one JSON line, and
answers its K-token runs and the places it builds code, one JSON line. A file it does not answer within READ_S, or
that ends it, is not judged, its notes say which, and a new child reads the rest.
"""

import base64
import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sim.core.format import human_bytes

READ_S = 10.0  # seconds of wall clock a file may take to read; the masters take 10–30 ms
MEMORY = 2 << 30  # the child's address space
ROOT = str(Path(__file__).resolve().parents[2])
CHILD = """
import base64, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
sys.path.insert(0, sys.argv[1])
from sim.grading.similarity import builds_code, runs, source_text
for line in sys.stdin:
    source = source_text(base64.b64decode(json.loads(line)))
    try:
        print(json.dumps([sorted(runs(source)), builds_code(source)]), flush=True)
    except Exception as e:  # blocks nested past the recursion limit: said, not a dead child
        print(json.dumps(f"could not be put in its normal form ({type(e).__name__})"), flush=True)
"""


@dataclass(frozen=True)
class Read:
    """One file as the child read it: its K-token runs, where it builds code, and why it was not read, if it was not
    ("took more than 10 s to read", "ended the process that read it")."""

    runs: frozenset[int]
    builds: tuple[str, ...]
    unread: str = ""


def read_all(sources: dict[str, bytes]) -> dict[str, Read]:
    """Each source ({name: its bytes}) decoded and read by a child, in order; a child that misses a deadline is
    ended and another reads on from the next file."""
    out, queue = {}, list(sources.items())
    while queue:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", CHILD, ROOT, str(MEMORY)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            while queue:
                name, source = queue.pop(0)
                answer = _ask(proc, json.dumps(base64.b64encode(source).decode()).encode() + b"\n")
                if isinstance(answer, str):
                    out[name] = Read(frozenset(), (), answer)
                    break  # this child is spent: a new one for the rest
                out[name] = Read(frozenset(answer[0]), tuple(answer[1]))
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()
    return out


def _ask(proc: subprocess.Popen, line: bytes) -> list | str:
    """The child's answer to one source, or why there is none: no whole line within READ_S, or the child ended (a
    file that needs more than its MEMORY; session 25 said "took more than 10 s" of a crash too)."""
    ended = f"ended the process that read it (which may hold {human_bytes(MEMORY)})"
    try:
        proc.stdin.write(line)
        proc.stdin.flush()
    except (BrokenPipeError, OSError):
        return ended
    fd, got = proc.stdout.fileno(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + READ_S
        while not got.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(timeout=left):
                return f"took more than {READ_S:g} s to read"
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return ended
            got += chunk
    try:
        answer = json.loads(got)
    except ValueError:
        return ended
    return answer if isinstance(answer, list | str) else ended
