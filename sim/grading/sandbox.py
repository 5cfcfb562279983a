"""One submission's process: `python -I -B` in a new session, a temporary directory, confined by the kernel, a watchdog.

The child confines itself (`sim.grading.confine`) before it imports anything else, then imports
the harness from the allow-list's files only. The grader talks to it through two pipes of its own
(frames of `sim.grading.wire`, each checked by `sim.grading.schema`); its stdout and stderr are
read with a cap. A run that outlives its time (`sim.grading.charge`), prints too much, runs too many threads (counted
from /proc while the grader waits for it) or breaks the protocol is ended by killing the whole process group; its
temporary directory is removed however it ends.
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from sim.core.format import human_bytes
from sim.grading import folder_removal, resident, schema, submission_file, wire
from sim.grading.charge import WALL_FACTOR, Charge
from sim.grading.confine import rlimits

SIM_ROOT = str(Path(__file__).resolve().parents[2])  # what the child puts first on its path to import sim

# The child's first lines: confine itself (nothing but the standard library and sim.grading.confine is loaded
# yet), then import the harness from the allowed files only, refuse threads from then on, and serve the grader.
BOOTSTRAP = """
import time
start = time.process_time()
import json, os, sys
settings = json.loads(sys.argv[1])
maps = os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC)  # before the walls: the harness seals what it lists
sys.path.insert(0, settings["root"])
from sim.grading import confine
from sim.grading.confine import modules
layers = confine.apply(settings)
ms = (time.process_time() - start) * 1000  # confinement's CPU time: its imports (ctypes), its system calls
if settings.get("probe"):
    confine.seal(layers)
    print(json.dumps(confine.verify(layers, settings)))
    sys.exit(0)
modules.install(settings["modules"], settings.get("packages", []))
if settings.get("kernel"):  # a GPU test's kernel, compiled and run by a process that never imports the submission
    from sim.grading.gpu_kernel import main
else:
    from sim.grading.harness import main
os.environ.update(settings.get("environment", {}))  # what those imports read once (TRITON_INTERPRET)
for name in settings.get("preload", []):  # what a driver imports lazily (Triton), before threads are refused
    __import__(name)
confine.seal(layers)
main(int(sys.argv[2]), int(sys.argv[3]), layers, ms, maps)
"""
CENSUS_S = 0.1  # how often the grader counts a child's threads while it waits for it
LIVE: set = set()  # the children running now, for `stop_all` on SIGINT/SIGTERM
STOPPING = threading.Event()  # set by `stop_all`: no new child starts
_LOCK = threading.Lock()


PASSED_ON = ("CUDA_", "CUPY_", "NVIDIA_", "LD_LIBRARY_PATH")  # the grader's environment variables the child sees


@dataclass(frozen=True)
class Limits:
    """What one submission's process may use."""

    wall_s: float = 10.0  # per test, wall clock
    cpu_s: int = 60  # the whole process, CPU time (RLIMIT_CPU)
    memory_bytes: int = 1 << 30  # address space (RLIMIT_AS); 0 for none (CUDA maps far more than it uses)
    output_bytes: int = 1 << 20  # stdout + stderr
    file_bytes: int = submission_file.MAX_BYTES  # largest file it may write (RLIMIT_FSIZE), its submission's copy too
    open_files: int = 64  # descriptors it may hold at once (RLIMIT_NOFILE)
    tmpfs_bytes: int = 16 << 20  # all it may write, where its folder can be a tmpfs of its own
    threads: int = 64  # at once, counted from /proc (`census`): the GPU driver's cap, which no seccomp seals


DEFAULT_LIMITS = Limits()


def within(limits: Limits) -> Limits:
    """`limits` as a child gets them: each rlimit lowered to the grader's hard one, which a user cannot raise."""
    return replace(limits, **rlimits.within({name: getattr(limits, name) for name in rlimits.KINDS}))


class ChildDied(Exception):
    """The submission's process ended, or was ended, in the middle of a test; the message says how."""


class Child:
    """A running harness process for one submission file."""

    def __init__(self, submission: Path | None, limits: Limits, confinement: dict):
        """Start the harness for `submission` (None: a kernel's child, confinement["kernel"]); `confinement` holds
        what every child shares (read set, uid, root, modules, layers to leave out), to which this child's limits
        (`within`) and own directory are added."""
        self.limits = within(limits)
        self.dir = tempfile.mkdtemp(prefix="flashsim-grade-")
        try:
            self._start(submission, confinement)
        except BaseException:
            folder_removal.remove(self.dir)
            raise
        self.reader = wire.Reader(schema.MAX_PAYLOAD, schema.check)
        self.output = {"stdout": bytearray(), "stderr": bytearray()}
        self.printed = 0
        self.killed_for: str | None = None
        self.counted = 0.0  # when `census` last counted its threads (time.monotonic)
        self.violations: list[dict] = []
        self.selector = selectors.DefaultSelector()
        self.selector.register(self._in, selectors.EVENT_READ, "pipe")
        self.selector.register(self.proc.stdout, selectors.EVENT_READ, "stdout")
        self.selector.register(self.proc.stderr, selectors.EVENT_READ, "stderr")

    def _start(self, submission: Path, confinement: dict) -> None:
        """Copy the submission into the child's folder (the child's own, if it runs as another uid) and start it."""
        self.file = None if submission is None else Path(self.dir) / "submission.py"
        if self.file:  # the one safe read (no link, pipe or device; capped)
            self.file.write_bytes(submission_file.read(submission, self.limits.file_bytes))
        uid = confinement.get("uid")
        if uid is not None:  # the child becomes `uid`: its directory and file are its own
            for path in filter(None, (self.dir, self.file)):
                os.chown(path, uid, uid)
        limits = self.limits
        settings = {**confinement, "cpu_s": limits.cpu_s, "memory_bytes": limits.memory_bytes,
                    "file_bytes": limits.file_bytes, "open_files": limits.open_files, "tmpfs_bytes": limits.tmpfs_bytes,
                    "write": [self.dir, *confinement.get("write_extra", ())], "parent": os.getpid()}  # fmt: skip
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.dir, "TMPDIR": self.dir, "LANG": "C.UTF-8"}
        env |= {k: v for k, v in os.environ.items() if k.startswith(PASSED_ON)}  # where CUDA is, for the GPU path
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
        to_child, self._out = os.pipe()
        self._in, from_child = os.pipe()
        try:
            with _LOCK:  # no child starts once `stop_all` has begun
                if STOPPING.is_set():
                    raise ChildDied("grading was interrupted")
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", "-c", BOOTSTRAP, json.dumps(settings), str(to_child), str(from_child)],
                    cwd=self.dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    pass_fds=(to_child, from_child), start_new_session=True,
                )  # fmt: skip
                LIVE.add(self)
        except BaseException:
            os.close(self._in)
            os.close(self._out)
            raise
        finally:
            os.close(to_child)
            os.close(from_child)

    def exchange(self, header: dict, arrays=(), serve=None, wall_s: float | None = None) -> tuple[dict, list]:
        """Send a message, answer the child's requests with `serve(header, arrays)` until it sends its answer (a frame
        whose op is not a request), and return that; ChildDied if it does not within `wall_s` (the limits' if None)
        of time charged to it (`Charge`), or WALL_FACTOR times that of wall clock."""
        budget, self.reader.header_bytes = wall_s or self.limits.wall_s, 0
        charge, self.wall_s = Charge(self.proc.pid), WALL_FACTOR * budget
        deadline, watchdog = time.monotonic() + self.wall_s, threading.Timer(self.wall_s + 2.0, self.kill, ("timeout",))
        watchdog.start()
        try:
            if header:
                self._send(header, arrays)
            while True:
                while self.reader.ready:
                    frame, data = self.reader.ready.popleft()
                    if frame["op"] == "violation":
                        self.violations.append(frame)
                    elif frame["op"] in ("load", "put", "free", "store", "alloc"):
                        reply = serve(frame, data) if serve else ({"op": "refused", "message": "no chip"}, [])
                        if reply is not None:
                            self._send(*reply)
                    else:
                        return frame, data
                left, spent = deadline - time.monotonic(), charge.spent()
                if spent > budget:
                    self.kill("time")
                    raise ChildDied(f"did not finish within {budget:g} s (its CPU time, the grader's for it, its sleeps)")  # fmt: skip
                if left <= 0:
                    self.kill("timeout")
                    raise ChildDied(self.death())
                since = time.monotonic()
                if not self._pump(min(left, budget - spent)):
                    charge.waited(time.monotonic() - since)
        finally:
            watchdog.cancel()

    def _send(self, header: dict, arrays=()) -> None:
        try:
            wire.send(self._out, header, arrays)
        except (BrokenPipeError, OSError):
            raise ChildDied(self.death()) from None

    def census(self) -> None:
        """End the process if it runs more than `limits.threads` threads (counted at most every CENSUS_S)."""
        now = time.monotonic()
        if now < self.counted + CENSUS_S:
            return
        self.counted = now
        threads = resident.threads(self.proc.pid)
        if threads is not None and threads > self.limits.threads:
            self.kill("threads")
            raise ChildDied(f"ran more than {self.limits.threads} threads at once; stopped")

    def _pump(self, timeout: float) -> bool:
        """Count the child's threads (`census`), then read whatever it has written within `timeout` seconds; whether
        it wrote to the pipe."""
        self.census()
        wrote = False
        for key, _ in self.selector.select(min(timeout, CENSUS_S)):
            fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
            chunk = os.read(fd, 1 << 20)
            if key.data == "pipe":
                wrote = True
                if not chunk:
                    raise ChildDied(self.death())
                try:
                    self.reader.feed(chunk)
                except wire.WireError as e:
                    self.kill("protocol")
                    raise ChildDied(f"malformed message: {e}") from None
                if self.reader.header_bytes > schema.MAX_REQUESTS:  # decoding them holds the GIL classmates share
                    self.kill("protocol")
                    raise ChildDied(f"sent more than {human_bytes(schema.MAX_REQUESTS)} of requests in one test")
            elif chunk:
                self.printed += len(chunk)
                kept = self.output[key.data]
                kept += chunk[: max(0, 4096 - len(kept))]
                if self.printed > self.limits.output_bytes:
                    self.kill("output")
                    raise ChildDied(f"printed more than {human_bytes(self.limits.output_bytes)}; stopped")
            else:
                self.selector.unregister(key.fileobj)
        return wrote

    def death(self) -> str:
        """Why the process is gone: its signal or exit code, read with the limits it ran under."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill("hung")
            code = self.proc.wait()
        err = bytes(self.output["stderr"]).decode(errors="replace")
        if self.killed_for == "timeout":
            return f"did not finish within {self.wall_s:g} s (wall clock)"
        if self.killed_for == "hung":
            return "closed its pipe to the grader and did not exit"
        if "MemoryError" in err:
            return f"ran out of memory (limit {human_bytes(self.limits.memory_bytes)})"
        if code == -signal.SIGXCPU:
            return f"used more than {self.limits.cpu_s} s of CPU time"
        if code == -signal.SIGKILL:  # not the grader's: its CPU time's hard limit, the kernel's OOM killer, or itself
            return f"was killed (SIGKILL: past {self.limits.cpu_s} s of CPU time, out of memory, or by itself)"
        if code < 0:
            return f"crashed ({signal.Signals(-code).name})"
        last = err.strip().splitlines()[-1:] or [""]
        return f"exited with code {code} in the middle of the test {last[0][:200]}".rstrip()

    def kill(self, why: str) -> None:
        """End the whole process group."""
        self.killed_for = self.killed_for or why
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Say goodbye if the pipe has room, end the process group, remove the temporary directory. Never blocks: a
        child may have shrunk its pipe and filled it (F_SETPIPE_SZ), then stopped reading."""
        if self.proc.poll() is None:
            try:
                os.set_blocking(self._out, False)  # a full pipe: BlockingIOError, and the kill below ends it
                wire.send(self._out, {"op": "bye"})
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill("closed")
        self.proc.wait()
        self.selector.close()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
        os.close(self._in)
        os.close(self._out)
        with _LOCK:
            LIVE.discard(self)
        folder_removal.remove(self.dir)  # however deep the child nested its folders; never raises

    def printed_text(self) -> str:
        """The start of what the submission printed (stdout, then stderr)."""
        return b"".join(bytes(v) for v in self.output.values()).decode(errors="replace")


def stop_all() -> None:
    """Start no new child and kill every running one (their threads then close them and remove their folders)."""
    STOPPING.set()
    with _LOCK:
        for child in list(LIVE):
            child.kill("interrupted")
