"""The memory test read from outside the child: /proc's VmHWM, which a submission cannot reset as it can tracemalloc.

A submission that moves Algorithm 1's exact bytes through the grader's HBM but computes softmax(Q Kᵀ) V from a whole
N × Nk matrix, then resets tracemalloc's peak, scored 100 before (review of 2026-11-28); it must fail the memory test.
"""

import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sim.core.errors import InputError
from sim.grading import grader, problem, resident, spec

SUBMISSIONS = Path(__file__).parent / "grading_submissions"

# Loads every tile Algorithm 1 loads, in its order, keeps copies, and at the last K/V block computes the answer from
# the whole of S (float64, N × Nk); then hides the peak from tracemalloc.
REPLAY = """
import tracemalloc
import numpy as np


def forward(chip, *, Br, Bc, scale):
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    Tr, Tc = -(-N // Br), -(-Nk // Bc)
    for name, shape, dtype in (("O", (N, d), chip.hbm.tensors["Q"].dtype), ("ℓ", (N,), np.float32),
                               ("m", (N,), np.float32)):
        chip.hbm.alloc(name, shape, dtype)
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        r = rows[1] - rows[0]
        for t, v in (("O", np.zeros((r, d))), ("ℓ", np.zeros(r)), ("m", np.full(r, -np.inf))):
            chip.store(t, chip.put("x", v), rows)
            chip.free("x")
    K, V, Q, answer = np.zeros((Nk, d)), np.zeros((Nk, d)), np.zeros((N, d)), None
    for j in range(Tc):
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        K[cols[0]:cols[1]] = chip.load("K_j", "K", cols)
        V[cols[0]:cols[1]] = chip.load("V_j", "V", cols)
        for i in range(Tr):
            rows = (i * Br, min((i + 1) * Br, N))
            Q[rows[0]:rows[1]] = chip.load("Q_i", "Q", rows)
            for t in ("O", "ℓ", "m"):
                chip.load(t + "_i", t, rows)
            chip.free("Q_i", "O_i", "ℓ_i", "m_i")
            if j == Tc - 1 and answer is None:
                S = scale * (Q @ K.T)
                m = S.max(axis=1)
                P = np.exp(S - m[:, None])
                l = P.sum(axis=1)
                answer = (P @ V / l[:, None], l, m)
                del S, P
            r = rows[1] - rows[0]
            parts = (np.zeros((r, d)), np.ones(r), np.zeros(r)) if answer is None else (
                a[rows[0]:rows[1]] for a in answer)
            for t, v in zip(("O", "ℓ", "m"), parts):
                chip.store(t, chip.put("x", v), rows)
                chip.free("x")
        chip.free("K_j", "V_j")
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
"""


WHOLE_S = """                S = scale * (Q @ K.T)
                m = S.max(axis=1)
                P = np.exp(S - m[:, None])
                l = P.sum(axis=1)
                answer = (P @ V / l[:, None], l, m)
                del S, P
"""
# The same replay, its S (all N × Nk, float32) parked where VmHWM does not count it, 8 rows at a time, then read
# back 8 rows at a time to finish the softmax: its resident memory rises by less than a tile's worth.
FINISH = """

def finish(N, V, read, rows=8):
    O, l, m = np.zeros((N, V.shape[1])), np.zeros(N), np.zeros(N)
    for start in range(0, N, rows):
        stop = min(start + rows, N)
        S = read(start, stop).astype(np.float64)
        m[start:stop] = S.max(axis=1)
        P = np.exp(S - m[start:stop, None])
        l[start:stop] = P.sum(axis=1)
        O[start:stop] = P @ V / l[start:stop, None]
    return O, l, m
"""
IN_FILES = """
def parked(Q, K, V, scale, rows=8, per_file=128):  # in temporary files of its folder, 512 KiB each (a file: 1 MiB)
    import tempfile

    N, Nk = Q.shape[0], K.shape[0]
    files = [tempfile.TemporaryFile(dir=".") for _ in range(0, N, per_file)]
    for start in range(0, N, rows):
        files[start // per_file].write((scale * (Q[start:start + rows] @ K.T)).astype(np.float32).tobytes())

    def read(start, stop):
        files[start // per_file].seek(4 * (start % per_file) * Nk)
        return np.frombuffer(files[start // per_file].read(4 * (stop - start) * Nk), np.float32).reshape(-1, Nk)

    return finish(N, V, read)
"""
IN_A_SHARED_MAPPING = """
def parked(Q, K, V, scale, rows=8):  # in a shared anonymous mapping, each block's pages dropped from the process
    import mmap

    N, Nk = Q.shape[0], K.shape[0]
    S = mmap.mmap(-1, 4 * N * Nk)
    for start in range(0, N, rows):
        block = (scale * (Q[start:start + rows] @ K.T)).astype(np.float32).tobytes()
        S[4 * start * Nk:4 * start * Nk + len(block)] = block
        S.madvise(mmap.MADV_DONTNEED, 4 * start * Nk, len(block))

    def read(start, stop):  # its pages dropped again once copied out
        block = np.frombuffer(S[4 * start * Nk:4 * stop * Nk], np.float32).reshape(-1, Nk)
        S.madvise(mmap.MADV_DONTNEED, 4 * start * Nk, block.nbytes)
        return block

    return finish(N, V, read)
"""
IN_PIPES = """
def parked(Q, K, V, scale, rows=8):  # in the kernel's buffers of pipes it makes, 1 MiB a pipe (F_SETPIPE_SZ)
    import fcntl
    import os

    N, Nk = Q.shape[0], K.shape[0]
    pipes = [os.pipe() for _ in range(-(-4 * N * Nk // 2**20))]
    for _, w in pipes:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 2**20)
    for start in range(0, N, rows):
        block = (scale * (Q[start:start + rows] @ K.T)).astype(np.float32).tobytes()
        os.write(pipes[4 * start * Nk // 2**20][1], block)

    def read(start, stop):  # the rows in order, each pipe read as it was written
        return np.frombuffer(os.read(pipes[4 * start * Nk // 2**20][0], 4 * (stop - start) * Nk),
                             np.float32).reshape(-1, Nk)

    return finish(N, V, read)
"""
PARKS = {  # where S is parked → what the grader says now (before: "correct, and your process's memory peaked at …")
    "files": (IN_FILES, "raised PermissionError: [Errno 13] Permission denied: '"),  # its folder is read-only to it
    "a shared mapping": (IN_A_SHARED_MAPPING, "raised PermissionError: [Errno 1] Operation not permitted (line "),
    "pipes": (IN_PIPES, "raised PermissionError: [Errno 1] Operation not permitted (line "),
}  # the second and third: seccomp refuses a shared anonymous mapping, and (once the harness is loaded) a new pipe


def memory_tests(name: str):
    assignment = spec.load(spec.locate(name))
    return replace(assignment, tests=tuple(t for t in assignment.tests if t["check"] == "memory"))


def test_a_replay_that_holds_s_and_hides_it_from_tracemalloc_fails_the_memory_test(tmp_path):
    path = tmp_path / "replay.py"
    path.write_text(REPLAY)
    assignment = memory_tests("02")
    (report,) = grader.grade(assignment, [path], seed=3, jobs=1)
    (t,) = report.tests
    N, Nk = assignment.tests[0]["N"], assignment.tests[0]["Nk"]
    assert t.status == "failed" and t.points == 0, t.feedback
    assert t.feedback.startswith("correct, but your process's resident memory rose by "), t.feedback
    assert f"allowed half of one N × Nk float32 matrix, {2 * N * Nk / 2**20:.1f} MiB" in t.feedback
    risen = float(t.feedback.split("rose by ")[1].split(" MiB")[0])
    assert risen * 2**20 >= 8 * N * Nk  # at least its float64 S


# The same replay, its S and P in a buffer it touched when imported: counted only if the grader's mark came first.
IN_A_BUFFER = """                S = np.matmul(Q, K.T, out=BUFFER[: N * Nk].reshape(N, Nk))
                S *= scale
                m = S.max(axis=1)
                S -= m[:, None]
                np.exp(S, out=S)
                l = S.sum(axis=1)
                answer = (S @ V / l[:, None], l, m)
"""


def test_a_buffer_touched_on_import_while_the_grader_is_slow_to_mark_counts(tmp_path, monkeypatch):
    # before: the hello (and so the import) went before the mark; a grader a moment late to mark (its other
    # threads, a loaded machine) took the buffer into the base, and S in it rose by nothing
    def late(pid, mark=resident.mark):
        time.sleep(1.0)
        return mark(pid)

    monkeypatch.setattr(resident, "mark", late)
    path = tmp_path / "buffer.py"
    top = "BUFFER = np.ones(1 << 21)  # 16 MiB, touched: room for a float64 S of N = Nk = 1024 and more\n"
    path.write_text(REPLAY.replace(WHOLE_S, IN_A_BUFFER).replace("\n\ndef forward", top + "\n\ndef forward", 1))
    assignment = memory_tests("02")
    N, Nk = assignment.tests[0]["N"], assignment.tests[0]["Nk"]
    assert 8 * N * Nk <= 16 << 20
    (report,) = grader.grade(assignment, [path], seed=3, jobs=1)
    (t,) = report.tests
    assert t.status == "failed" and t.points == 0, t.feedback
    assert t.feedback.startswith("correct, but your process's resident memory rose by "), t.feedback
    assert float(t.feedback.split("rose by ")[1].split(" MiB")[0]) * 2**20 >= 8 * N * Nk


@pytest.mark.parametrize("where", sorted(PARKS))
def test_a_replay_that_parks_s_outside_its_resident_memory_fails_the_memory_test(tmp_path, where):
    code, refused = PARKS[where]
    path = tmp_path / "parks.py"
    path.write_text(REPLAY.replace(WHOLE_S, "                answer = parked(Q, K, V, scale)\n") + FINISH + code)
    (report,) = grader.grade(memory_tests("02"), [path], seed=3, jobs=1)
    (t,) = report.tests
    assert t.status == "failed" and t.points == 0 and report.flags == []
    assert t.feedback.startswith(refused) and "\n" not in t.feedback, t.feedback


@pytest.mark.parametrize("name", ["02", "03", "04"])
def test_the_masters_pass_the_resident_check(name):
    assignment = memory_tests(name)
    (report,) = grader.grade(assignment, [assignment.path], seed=4, jobs=1)
    assert [t.status for t in report.tests] == ["passed"], [t.feedback for t in report.tests]


ALLOCATES = """
import sys, numpy as np
a = np.ones(40 << 17)  # 40 MiB, touched
del a
print("freed", flush=True)
sys.stdin.readline()
"""


def test_the_peak_counts_what_was_freed_and_starts_at_the_mark():
    proc = subprocess.Popen([sys.executable, "-c", ALLOCATES], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "freed"
        before = resident.peak(proc.pid).held
        base = resident.mark(proc.pid)  # the peak now starts from what is resident
        assert before - base.held >= 36 << 20  # the freed 40 MiB stayed in the peak until the mark (the kernel's
        # per-thread RSS counters lag by up to 64 pages a thread)
        assert resident.peak(proc.pid).held - base.held < 8 << 20
        assert 4 << 20 < base.files < base.held  # the interpreter's and NumPy's library pages, within the whole
    finally:
        proc.communicate("\n")
    assert resident.peak(proc.pid) is None and resident.mark(proc.pid) is None  # gone: nothing to read


def test_a_memory_test_too_small_for_the_resident_check_is_refused():
    (test,) = memory_tests("04").tests
    small = test | {"N": 700, "Nk": 700, "Br": 8, "Bc": 8}  # 1.9 MiB matrix: half is below the 2 MiB floor
    with pytest.raises(InputError, match=r"half an N × Nk float32 matrix \(957\.0 KiB\).*below 2\.0 MiB"):
        problem.make(spec.load(spec.locate("04")).grading, small, 1)


# The replay, leaving the moment the harness has sent "done": a zombie has no VmHWM for the grader to read
LEAVES = """
    if chip.hbm.tensors["Q"].shape[0] >= 1024:  # the memory test
        post = chip.link.post

        def leave_after_done(header, arrays=()):
            post(header, arrays)
            if header.get("op") == "done":
                os._exit(0)

        chip.link.post = leave_after_done
"""


def test_a_replay_that_exits_right_after_its_answer_fails_the_memory_test(tmp_path):
    # before: /proc/<pid>/status of the ended child had no VmHWM, the resident check was skipped and S went unseen:
    # 100 / 100 (red team h69, 2026-11-28)
    path = tmp_path / "leaves.py"
    source = REPLAY.replace("import tracemalloc\n", "import os\nimport tracemalloc\n", 1)
    path.write_text(source.replace("scale):\n", "scale):\n" + LEAVES, 1))
    assert "os._exit(0)" in path.read_text()
    (report,) = grader.grade(memory_tests("02"), [path], seed=3, jobs=1)
    (t,) = report.tests
    assert t.status == "failed" and t.points == 0, t.feedback
    # a race the grader may win or lose: it reads VmHWM before the exit is through (S's 4 MiB seen), or finds none
    # (the exit seen); each fails the test, each in its own one line (session 23's lone failure here was this race)
    assert t.feedback == (
        "its process ended right after its answer: a memory test needs its resident memory, read from outside"
    ) or re.fullmatch(r"correct, but your process's resident memory rose by \d+\.\d MiB \(read by the grader from "
                      r"/proc; allowed half of one N × Nk float32 matrix, 2\.0 MiB\) — build S and P tile by tile",
                      t.feedback), t.feedback  # fmt: skip


SEALED = """
import ctypes, os, pickle, sys
sys.path.insert(0, sys.argv[1])
maps = os.open("/proc/self/maps", os.O_RDONLY)
import numpy
from sim.grading import harness
harness.seal(maps)
libc = ctypes.CDLL(None, use_errno=True)
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mmap.restype = ctypes.c_void_p
spans = {}  # the first [heap] listed: the heap as sealed (what it grew since is another mapping)
for line in open("/proc/self/maps"):
    if line.split()[-1] in ("[stack]", "[heap]"):
        spans.setdefault(line.split()[-1], [int(x, 16) for x in line.split()[0].split("-")])
refused = []
for name, (start, end) in sorted(spans.items()):
    refused.append((name, libc.munmap(start, 4096), ctypes.get_errno()))
    refused.append((name, libc.mmap(start, 4096, 3, 0x32, -1, 0) == start, ctypes.get_errno()))
sys.setrecursionlimit(10**6)
x = []
for _ in range(1400):  # (Python 3.12 stops C recursion at 1,500 levels whatever the recursion limit)
    x = [x]
before = spans["[stack]"][1] - spans["[stack]"][0]
pickle.dumps(x)  # C recursion: the sealed stack must still grow
after = next(line for line in open("/proc/self/maps") if line.split()[-1] == "[stack]").split()[0].split("-")
print(refused, int(after[1], 16) - int(after[0], 16) > before)
"""


@pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import ctypes; l = ctypes.CDLL(None); print(l.syscall(462, 0, 0, 0))"],
                   capture_output=True, text=True).stdout.strip() != "0",
    reason="no mseal here (Linux 6.10+)",
)  # fmt: skip
def test_the_seal_refuses_giving_back_the_stack_and_the_heap_and_the_stack_still_grows():
    """Red team 83 dropped the heap's free pages by laying a mapping over them; the stack was left unsealed too.
    1,400 lists deep, pickle grows the sealed stack (here from 132 KiB to 252 KiB)."""
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", SEALED, root], capture_output=True, text=True, timeout=60)
    EPERM = 1
    refused = [("[heap]", -1, EPERM), ("[heap]", False, EPERM), ("[stack]", -1, EPERM), ("[stack]", False, EPERM)]
    # munmap −1, mmap not in place, EPERM each; (OpenBLAS says at exit that it could not unmap its sealed buffers)
    assert f"{refused} True" in out.stdout.splitlines(), out.stdout + out.stderr
