"""Assignment 5 on a GPU: the master's device function, compiled into the readable kernel, scores full marks."""

from pathlib import Path

import pytest
from test_grading_containment import thread_bomb

from sim.grading import export, gpu_kernel, grader, sandbox, spec
from sim.grading.confine import seccomp


def test_the_splice_replaces_line_9_with_a_call_and_keeps_the_rest():
    master = spec.locate("05")
    namespace: dict = {}
    exec(compile(master.read_text(), str(master), "exec"), namespace)
    kernel = gpu_kernel.template()
    spliced = gpu_kernel.splice(kernel, namespace["online_softmax_row_source"]())
    assert spliced.count("__device__ void online_softmax_row(") == 1
    assert spliced.index("online_softmax_row(float* S") < spliced.index('extern "C" __global__')
    assert "online_softmax_row(S_ij + r * BC, BC, m_i + r, l_i + r, rescale + r);" in spliced
    assert "rowsum += p;" not in spliced.split('extern "C" __global__')[1]  # the kernel's own line 9 is gone
    assert spliced.split("// line 10:")[1] == kernel.split("// line 10:")[1]


@pytest.mark.gpu
def test_the_master_scores_full_marks_and_the_stub_zero_on_the_gpu(tmp_path):
    assignment = spec.load(spec.locate("05"))
    stub = export.export(assignment.path, student=tmp_path)
    # Landlock with what CUDA reads and writes (allowlist.cuda_paths), seccomp with its threads, Unix sockets and
    # shared memory allowed: nothing missing, no --allow-weak-isolation needed
    subs = [assignment.path, Path(stub)]
    walls = grader.isolate(assignment, subs)
    assert walls.missing == () and seccomp.CUDA in walls.layers
    right, wrong = grader.grade(assignment, subs, seed=3, jobs=1, walls=walls)
    assert right.score == 100, [t.feedback for t in right.tests]
    assert wrong.score == 0 and all(t.feedback.startswith("not implemented yet") for t in wrong.tests)


# Starts 1000 native threads where the GPU driver calls it, then hands in an empty device function
THREADS = thread_bomb(
    "online_softmax_row_source()",
    "    time.sleep(5)\n    return '__device__ void "
    "online_softmax_row(float* S, int n, float* m, float* l, float* rescale) {}'",
)


# Forks through the C library where the GPU driver calls it (the child's code runs unchecked by Python there)
FORKS = """
import ctypes
import errno


def online_softmax_row_source():
    libc = ctypes.CDLL(None, use_errno=True)
    pid = libc.fork()
    if pid == 0:
        libc._exit(0)
    raise RuntimeError(f"fork {'made' if pid > 0 else errno.errorcode[ctypes.get_errno()]}")
"""


# Reads the master through the C library, past Python's audit hook: only Landlock stops it
READS_MASTER = """
import ctypes
import errno


def online_softmax_row_source():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open({path!r}.encode(), 0)
    raise RuntimeError(f"open {{'made' if fd >= 0 else errno.errorcode[ctypes.get_errno()]}}")
"""


@pytest.mark.gpu
def test_a_thread_bomb_a_fork_and_a_read_of_the_master_on_the_gpu_driver_are_stopped(tmp_path):
    assignment = spec.load(spec.locate("05"))
    (tmp_path / "threads.py").write_text(THREADS)
    (tmp_path / "forks.py").write_text(FORKS)
    (tmp_path / "reads.py").write_text(READS_MASTER.format(path=str(assignment.path)))
    subs = [assignment.path, tmp_path / "threads.py", tmp_path / "forks.py", tmp_path / "reads.py"]
    walls = grader.isolate(assignment, subs)  # seccomp never sealed: the grader's census caps threads
    right, bomb, forks, reads = grader.grade(assignment, subs, seed=3, jobs=1, walls=walls)
    assert reads.tests[0].feedback.startswith("raised RuntimeError: open EACCES (line "), reads.tests[0].feedback
    assert right.score == 100, [t.feedback for t in right.tests]  # CUDA's threads, every test: under the cap
    assert bomb.tests[0].feedback == "ran more than 64 threads at once; stopped" and bomb.score == 0
    assert forks.tests[0].feedback.startswith("raised RuntimeError: fork EPERM (line "), forks.tests[0].feedback


@pytest.mark.gpu
def test_the_gpu_driver_keeps_the_instructors_limits_but_the_address_space(tmp_path):
    assignment = spec.load(spec.locate("05"))
    (tmp_path / "threads.py").write_text(THREADS)
    limits = sandbox.Limits(threads=48)  # before: the GPU path rebuilt its limits and put the default 64 back
    (bomb,) = grader.grade(assignment, [tmp_path / "threads.py"], seed=3, jobs=1, limits=limits)
    assert bomb.tests[0].feedback == "ran more than 48 threads at once; stopped"
