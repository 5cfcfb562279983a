"""Assignment 5 on a GPU: the master's device function, compiled into the readable kernel, scores full marks. Its
submission's process only hands in the source; the kernel runs in a process that never imported the submission
(on the CPU: the source's round trip and refusals, and that process reaching the real gpu_kernel.run)."""

import functools
import importlib.util
import tempfile
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_grading_containment import thread_bomb
from test_grading_isolation import walls_here

from sim.grading import export, gpu_kernel, grader, kernel_run, sandbox, schema, spec
from sim.grading.confine import seccomp

SWAPS = Path(__file__).parent / "hostile_submissions" / "gpu" / "swaps_gpu_driver.py"
RETURNS = "def online_softmax_row_source():\n    return {value}\n"
# Writes its own "done" frame (header {frame}) where the harness would send the source, then waits to be killed
FORGES = """
import json, os, struct, sys


def online_softmax_row_source():
    head = json.dumps({frame}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 0) + head)
    os.read(int(sys.argv[-2]), 1)
"""


@functools.cache
def walls():
    """The GPU assignment's walls (the submission's a CPU assignment's; `.kernel`: Landlock with CUDA's paths,
    seccomp with its threads), probed once."""
    return grader.isolate(spec.load(spec.locate("05")), [])


def one_test() -> spec.Assignment:
    assignment = spec.load(spec.locate("05"))
    return replace(assignment, tests=assignment.tests[:1])


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
    # the kernel's process: Landlock with what CUDA reads and writes (allowlist.cuda_paths), seccomp with its
    # threads, Unix sockets and shared memory allowed: nothing missing, no --allow-weak-isolation needed
    subs = [assignment.path, Path(stub)]
    walls = grader.isolate(assignment, subs)
    assert walls.missing == () and seccomp.CUDA in walls.kernel.layers and seccomp.CUDA not in walls.layers
    right, wrong = grader.grade(assignment, subs, seed=3, jobs=1, walls=walls)
    assert right.score == 100, [t.feedback for t in right.tests]
    assert wrong.score == 0 and all(t.feedback.startswith("not implemented yet") for t in wrong.tests)


# Tries to start 1000 native threads where the GPU driver calls it, then says how many it started
THREADS = thread_bomb("online_softmax_row_source()", '    raise RuntimeError(f"{n} native threads started")')


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
    walls = grader.isolate(assignment, subs)
    right, bomb, forks, reads = grader.grade(assignment, subs, seed=3, jobs=1, walls=walls)
    assert reads.tests[0].feedback.startswith("raised RuntimeError: open EACCES (line "), reads.tests[0].feedback
    assert right.score == 100, [t.feedback for t in right.tests]  # CUDA's threads, in the kernel's process
    # before: "ran more than 64 threads at once; stopped" — the submission's process had CUDA's seccomp filter
    assert bomb.tests[0].feedback.startswith("raised RuntimeError: 0 native threads started") and bomb.score == 0
    assert forks.tests[0].feedback.startswith("raised RuntimeError: fork EPERM (line "), forks.tests[0].feedback


@walls_here
def test_the_kernels_process_keeps_the_instructors_limits_but_the_address_space(monkeypatch):
    # before: the GPU path rebuilt its limits and put the default 64 threads back; then it lifted the address-space
    # cap of the submission's process too, which needs no CUDA
    made, real = [], sandbox.Child

    def child(path, limits, settings):
        made.append((settings.get("kernel", False), limits))
        return real(path, limits, settings)

    monkeypatch.setattr(sandbox, "Child", child)
    monkeypatch.setattr(grader, "gpu_missing", lambda assignment: None)
    limits = sandbox.Limits(threads=48)
    grader.grade(one_test(), [SWAPS], seed=3, jobs=1, limits=limits, walls=walls())
    assert made == [(False, limits), (True, replace(limits, memory_bytes=0))]
    assert limits.memory_bytes == 1 << 30


@walls_here
@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is here: the gpu test below runs it")
def test_a_submission_that_swaps_the_gpu_driver_gains_nothing_and_its_kernel_runs_elsewhere(monkeypatch):
    # before: 100 / 100 here, without a GPU: the kernel ran in the submission's process, whose replaced driver
    # answered. Now that process only hands in its (empty) source, and the kernel's process, which never imported
    # the submission, runs the real gpu_kernel.run (its replacement needed no CuPy): it stops at CuPy's import
    monkeypatch.setattr(grader, "gpu_missing", lambda assignment: None)
    assignment = spec.load(spec.locate("05"))
    (report,) = grader.grade(assignment, [SWAPS], seed=3, jobs=1, walls=walls())
    assert [t.feedback for t in report.tests] == ["raised ModuleNotFoundError: No module named 'cupy'"] * 5
    assert report.score == 0 and report.flags == []


@walls_here
@settings(max_examples=6, deadline=None)
@given(st.text(max_size=schema.MAX_SOURCE))
@example("😀" * schema.MAX_SOURCE)  # 12 bytes a character as JSON: the largest frame a source makes
@example("\x00\x1b[2J\u202e\ud800\n" + "x" * (schema.MAX_SOURCE - 8))
def test_the_source_reaches_the_kernels_process_as_the_submission_returned_it(source):
    seen = []

    def kernel(child, reply, walls, problem, limits, wall_s):
        seen.append(reply["source"])
        return {"op": "raised", "type": "RuntimeError", "message": "no kernel here"}, []

    with tempfile.TemporaryDirectory() as folder, mock.patch.object(grader, "gpu_missing", lambda a: None):
        path = Path(folder) / "source.py"
        path.write_text(f"SOURCE = {source!r}\n\n\n" + RETURNS.format(value="SOURCE"), encoding="utf-8")
        with mock.patch.object(kernel_run, "run", kernel):
            (report,) = grader.grade(one_test(), [path], seed=3, jobs=1, walls=walls())
    assert seen == [source] and report.tests[0].feedback == "raised RuntimeError: no kernel here"


REFUSED = {  # what the submission's function returns, or the frame it forges → the test's feedback
    RETURNS.format(value="42"): "raised TypeError: online_softmax_row_source() returned int; it must return the "
    "CUDA source as a str",
    RETURNS.format(value="b'__device__ void online_softmax_row() {}'"): "raised TypeError: "
    "online_softmax_row_source() returned bytes; it must return the CUDA source as a str",
    RETURNS.format(value=f"'x' * {schema.MAX_SOURCE + 1}"): "raised ValueError: online_softmax_row_source() "
    "returned 4,097 characters of CUDA source; at most 4,096",
    FORGES.format(frame={"op": "done", "peak": None}): "malformed message: done carries no CUDA source (a GPU "
    "test's answer is its source)",
    FORGES.format(frame={"op": "done", "source": 4097 * "x"}): "malformed message: done's source is 'xxxxxxxxx",
    FORGES.format(frame={"op": "done", "source": ["__device__"]}): "malformed message: done's source is ['__device__']",
}


@walls_here
def test_a_source_that_is_not_a_str_or_too_long_is_refused_before_any_kernel_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(grader, "gpu_missing", lambda assignment: None)
    monkeypatch.setattr(gpu_kernel, "launch_settings", None)  # a kernel's request would fail the grade itself
    paths = []
    for i, code in enumerate(REFUSED):
        paths.append(tmp_path / f"refused{i}.py")
        paths[-1].write_text(code)
    reports = grader.grade(one_test(), paths, seed=3, jobs=2, walls=walls())
    for report, feedback in zip(reports, REFUSED.values(), strict=True):
        assert report.tests[0].feedback.startswith(feedback) and report.score == 0, report.tests[0].feedback


# red team 83: the kernel's process compiles with no address-space cap; the preprocessor could take the machine's memory
DIRECTIVES = {
    '#include "/dev/zero"\n': "line 1 of the source holds '#'",
    "#define A0 x x\n#define A1 A0 A0\n": "line 1 of the source holds '#'",
    "/**/#define X 1\n": "line 1 of the source holds '#'",
    "%:define X 1\n": "line 1 of the source holds '%:'",
    "int a = 0; \\\n#define X 1\n": "line 1 of the source holds '\\\\'",
    '_Pragma("once")\n': "line 1 of the source holds '_Pragma'",
    "// fine\n  # pragma unroll 4  \n#pragma once\n": "line 3 of the source holds '#'",
}
FUNCTION = "__device__ void online_softmax_row(float* S, int n, float* m, float* l, float* rescale) {}"


@walls_here
def test_a_source_that_reaches_the_preprocessor_is_refused_in_the_kernels_process(tmp_path, monkeypatch):
    monkeypatch.setattr(grader, "gpu_missing", lambda assignment: None)
    paths = []
    for i, prefix in enumerate(DIRECTIVES):
        paths.append(tmp_path / f"directive{i}.py")
        paths[-1].write_text(RETURNS.format(value=repr(prefix + FUNCTION)))
    reports = grader.grade(one_test(), paths, seed=3, jobs=2, walls=walls())
    for report, said in zip(reports, DIRECTIVES.values(), strict=True):
        (t,) = report.tests
        assert t.feedback.startswith(f"raised ValueError: {said}: a device function needs no preprocessor"), t
    gpu_kernel.refuse_directives("#pragma unroll\n    #  pragma unroll 8\n" + FUNCTION)  # the one '#' it allows


@pytest.mark.gpu
def test_a_submission_that_swaps_the_gpu_driver_scores_0_on_the_gpu_and_the_master_full_marks():
    assignment = spec.load(spec.locate("05"))
    subs = [assignment.path, SWAPS]
    right, swaps = grader.grade(assignment, subs, seed=3, jobs=1, walls=grader.isolate(assignment, subs))
    assert right.score == 100, [t.feedback for t in right.tests]
    assert swaps.score == 0 and swaps.flags == []  # its empty device function, compiled and run: O and L wrong
    assert all(t.status == "failed" and t.feedback.startswith(("O[", "L[")) for t in swaps.tests), [
        t.feedback for t in swaps.tests
    ]
