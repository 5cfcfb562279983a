"""Submissions that misbehave — overflow SRAM, hang, raise, exhaust memory, print megabytes, reach for the
solutions, forge their numbers — each get a clear line, and the grader goes on with the next one."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from grading_submissions import variants

from sim.grading import grader, sandbox, spec

SUBMISSIONS = Path(__file__).parent / "grading_submissions"
ENTRIES = {"01": ("update", "merge"), "02": ("forward",), "03": ("forward",), "04": ("backward",)}
FAST = sandbox.Limits(wall_s=1.0)

BODIES = {
    "hangs": "    while True:\n        pass",
    "raises": "    raise ValueError('deliberately broken')",
    "exhausts_memory": "    return np.ones(1 << 33).sum()",
    "prints_megabytes": "    for _ in range(4096):\n        print('x' * 1023)",
    "reads_solution": "    open(SOLUTION).read()",
    "overflows_sram": "    args[0].put('everything', np.zeros(1 << 16))",
}


def hostile(folder: Path, name: str) -> list[Path]:
    """One submission per misbehaviour, with the assignment's entry points."""
    master = spec.locate(name)
    paths = []
    for kind, body in BODIES.items():
        if kind == "overflows_sram" and name == "01":
            continue
        functions = "\n\n".join(f"def {entry}(*args, **kwargs):\n{body}\n" for entry in ENTRIES[name])
        path = folder / f"{kind}.py"
        path.write_text(f"import numpy as np\n\nSOLUTION = {str(master)!r}\n\n\n{functions}")
        paths.append(path)
    return paths


def first_tests(assignment, n=2):
    return replace(assignment, tests=assignment.tests[:n])


@pytest.mark.parametrize("name", list(ENTRIES))
def test_each_misbehaviour_gets_its_own_clear_report(name, tmp_path):
    assignment = first_tests(spec.load(spec.locate(name)), 3)
    reports = {r.submission: r for r in grader.grade(assignment, hostile(tmp_path, name), seed=1, jobs=2, limits=FAST)}
    first = {k: r.tests[0].feedback for k, r in reports.items()}

    assert first["hangs.py"] == "did not finish within 1 s (its CPU time, the grader's for it, its sleeps)"
    assert reports["hangs.py"].tests[2].feedback.startswith("not run: the submission's process died 2 times")
    assert first["raises.py"] == "raised ValueError: deliberately broken (line 7, in " + ENTRIES[name][0] + ")"
    assert first["exhausts_memory.py"].startswith("ran out of memory: MemoryError (line 7")
    assert first["prints_megabytes.py"] == "printed more than 1.0 MiB; stopped"
    assert reports["reads_solution.py"].flags == [f"tried to read the instructor solutions: {spec.locate(name)}"]
    assert reports["reads_solution.py"].score == 0
    assert (
        reports["reads_solution.py"].tests[1].feedback
        == "not run: the submission tried to read the instructor solutions"
    )
    if name != "01":
        assert first["overflows_sram.py"].startswith("SRAM overflow: everything (256.0 KiB) does not fit")
    for r in reports.values():
        assert r.score == 0 and len(r.tests) == 3


def test_the_library_own_listing_cannot_be_imported_while_grading():
    (report,) = grader.grade(
        first_tests(spec.load(spec.locate("02"))), [SUBMISSIONS / "02" / "imports_library.py"], seed=1
    )
    assert report.flags == ["imported the library's solution: sim.algorithms"] and report.score == 0
    assert "could not import the submission: raised ImportError" in report.tests[0].feedback


def test_an_sram_overflow_names_the_buffers():
    (report,) = grader.grade(spec.load(spec.locate("02")), [SUBMISSIONS / "02" / "overflow.py"], seed=1)
    overflowed = [t.feedback for t in report.tests if t.feedback.startswith("SRAM overflow: ")]
    assert len(overflowed) >= 6
    # each test's SRAM is the listing's peak, no slack: holding all of Q, K and V at once fits in none but one block
    assert (
        overflowed[-1]
        == "SRAM overflow: V (32.0 KiB) does not fit; resident: Q 32.0 KiB, K 32.0 KiB = 65,536 B of 90,112 B (88.0 KiB)"
    )


def test_forged_counts_and_outputs_gain_nothing(tmp_path):
    assignment = spec.load(spec.locate("02"))
    paths = [SUBMISSIONS / "02" / "fa2_loop_order.py", variants.forger(tmp_path), SUBMISSIONS / "02" / "forges_done.py"]
    honest, forged, done = grader.grade(assignment, paths, seed=2, jobs=2)
    assert [(t.points, t.status) for t in forged.tests] == [(t.points, t.status) for t in honest.tests]
    assert forged.hbm_bytes == honest.hbm_bytes and forged.score == honest.score < 100
    assert done.score == 0 and all(t.status == "failed" for t in done.tests)


def test_the_grader_goes_on_after_a_bad_submission(tmp_path):
    assignment = first_tests(spec.load(spec.locate("02")))
    paths = [*hostile(tmp_path, "02")[:2], spec.locate("02")]
    reports = grader.grade(assignment, paths, seed=1, jobs=1, limits=FAST)
    assert [r.score for r in reports] == [0, 0, assignment.points]


MISUSES = {
    "load outside K": ('chip.load("K_j", "K", (0, 10**6))', "refused: load K rows [0, 1000000] outside 0…"),
    "store a value not in SRAM": (
        'chip.hbm.alloc("O", (2, 2), np.float32); chip.store("O", np.zeros((2, 2)), (0, 2))',
        "raised AssertionError: store: only SRAM-resident buffers can be written to HBM",
    ),
    "overwrite an input": ('chip.hbm.alloc("Q", (4, 4), np.float32)', "refused: hbm.alloc: Q is an input"),
    "read HBM directly": (
        'chip.hbm.tensors["K"][0]',
        "raised InputError: HBM tensor K cannot be indexed: bring a tile",
    ),
    "place a result": (
        'chip.hbm.place("O", np.zeros(3))',
        "raised InputError: hbm.place: the grader places the inputs",
    ),
}


def test_misusing_the_chip_gets_a_refusal_naming_the_call(tmp_path):
    paths = []
    for i, (code, _) in enumerate(MISUSES.values()):
        path = tmp_path / f"misuse_{i}.py"
        path.write_text(f"import numpy as np\n\n\ndef forward(chip, *, Br, Bc, scale):\n    {code}\n")
        paths.append(path)
    reports = grader.grade(first_tests(spec.load(spec.locate("02")), 1), paths, seed=1, jobs=2)
    for (what, (_, message)), report in zip(MISUSES.items(), reports, strict=True):
        assert report.tests[0].feedback.startswith(message), (what, report.tests[0].feedback)


def test_no_loaded_module_leads_to_the_library_listings():
    (report,) = grader.grade(
        first_tests(spec.load(spec.locate("02")), 1), [SUBMISSIONS / "02" / "finds_listings.py"], seed=1
    )
    assert report.tests[0].feedback.startswith("raised RuntimeError: nothing"), report.tests[0].feedback


# A grader started under hard limits lower than a child asks for (a login node's `ulimit -H`): a user cannot raise
# them, and the child failed to start ("a confined process could not start here (ValueError: not allowed to raise
# maximum limit)"); it gets the lower limits instead, and the grader's messages name them.
UNDER_HARD_LIMITS = """
import json, resource, sys
for kind, top in ((resource.RLIMIT_CPU, 50), (resource.RLIMIT_NOFILE, 48), (resource.RLIMIT_FSIZE, 1 << 19),
                  (resource.RLIMIT_AS, 900 << 20)):
    resource.setrlimit(kind, (top, top))
from dataclasses import asdict, replace
from pathlib import Path
from sim.grading import grader, sandbox, spec
a = spec.load(spec.locate("02"))
reports = grader.grade(replace(a, tests=a.tests[:1]), [Path(sys.argv[1]), a.path], seed=1, jobs=1)
none = sandbox.within(sandbox.Limits(memory_bytes=0)).memory_bytes  # none asked (the GPU driver's): none set
print(json.dumps([asdict(sandbox.within(sandbox.Limits())), none, [[r.score, r.tests[0].feedback] for r in reports]]))
"""
REPORTS_LIMITS = """import resource


def forward(chip, *, Br, Bc, scale):
    kinds = ("CPU", "NOFILE", "FSIZE", "AS")
    raise RuntimeError(" ".join(f"{k}={resource.getrlimit(getattr(resource, 'RLIMIT_' + k))}" for k in kinds))
"""


def test_a_grader_under_lower_hard_limits_gives_its_children_those_and_still_grades(tmp_path):
    (tmp_path / "limits.py").write_text(REPORTS_LIMITS)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", UNDER_HARD_LIMITS, str(tmp_path / "limits.py")], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    limits, none, [(score, feedback), (master, _)] = json.loads(out.stdout)
    assert (limits["cpu_s"], limits["open_files"], limits["file_bytes"], limits["memory_bytes"]) == (
        49, 48, 1 << 19, 900 << 20)  # fmt: skip
    assert feedback.startswith(f"raised RuntimeError: CPU=(49, 50) NOFILE=(48, 48) FSIZE=({1 << 19}, {1 << 19}) "
                               f"AS=({900 << 20}, {900 << 20}) (line 6, in forward)"), feedback  # fmt: skip
    assert score == 0 and master == 10 and none == 0


def test_a_submission_may_write_in_its_own_working_folder(tmp_path):
    # its folder is writable where no memory test is graded (assignment 01); with namespaces the folder becomes a
    # tmpfs, and the working directory stayed the folder under the mount, outside Landlock's rule: "Permission
    # denied: 'notes.txt'" before (red team h69, 2026-11-28)
    master = spec.locate("01")
    path = tmp_path / "writes.py"
    path.write_text(
        'with open("notes.txt", "w") as f:\n    f.write("scratch")\nassert open("notes.txt").read() == "scratch"\n'
        + master.read_text(encoding="utf-8")
    )
    (report,) = grader.grade(first_tests(spec.load(master), 2), [path], seed=1, jobs=1)
    assert report.score == report.max_score and report.flags == [], [t.feedback for t in report.tests]


NEGATIVE_L = """    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        chip.store("ℓ", chip.put("neg", -np.ones(rows[1] - rows[0])), rows)
        chip.free("neg")
"""


def test_a_negative_row_sum_is_a_wrong_answer_and_no_warning_of_the_graders(tmp_path, recwarn):
    # before: NumPy's "invalid value encountered in log" reached the instructor's terminal (red team h72)
    text = spec.locate("02").read_text(encoding="utf-8")
    last = '        chip.free("K_j", "V_j")\n'
    assert text.count(last) == 1
    path = tmp_path / "negative.py"
    path.write_text(text.replace(last, last + NEGATIVE_L))
    (report,) = grader.grade(first_tests(spec.load(spec.locate("02")), 1), [path], seed=1, jobs=1)
    assert report.score == 0 and report.tests[0].feedback.startswith("m + log ℓ[0] is -inf where"), report.tests[0]
    assert [str(w.message) for w in recwarn] == []


@pytest.mark.parametrize(
    "body, said",
    [  # before: "ran out of memory (limit 1.0 GiB)" and "used more than 60 s of CPU time" (red team h72)
        ("    os.kill(os.getpid(), signal.SIGKILL)", "was killed (SIGKILL: past 60 s of CPU time, out of memory, or "),
        ("    os.close(chip.link.fd_out)\n    time.sleep(30)", "closed its pipe to the grader and did not exit"),
    ],
)
def test_a_child_that_ends_oddly_is_told_how(tmp_path, body, said):
    path = tmp_path / "ends.py"
    path.write_text(f"import os\nimport signal\nimport time\n\n\ndef forward(chip, **kw):\n{body}\n")
    (report,) = grader.grade(first_tests(spec.load(spec.locate("02")), 1), [path], seed=1, jobs=1)
    assert said in report.tests[0].feedback and "\n" not in report.tests[0].feedback, report.tests[0].feedback


FLOODS = """import os
import time

from sim.grading import wire


def forward(chip, **kw):
    frame = wire.encode({"op": "free", "bufs": ["a" * 1990] * 32}) * 16  # 64 KiB headers, one after another
    end = time.monotonic() + 9.0
    while time.monotonic() < end:
        data = memoryview(frame)
        while data:
            data = data[os.write(chip.link.fd_out, data) :]
    raise RuntimeError("flooded")
"""


def test_a_flood_of_requests_is_stopped_before_it_starves_a_classmate(tmp_path):
    # before: the grader's thread decoded the flood for 9 s a test, holding the GIL; a classmate graded beside it
    # (--jobs 2) timed out on a test it passes alone (red team h72)
    path = tmp_path / "floods.py"
    path.write_text(FLOODS)
    (report,) = grader.grade(first_tests(spec.load(spec.locate("02")), 1), [path], seed=1, jobs=1)
    assert report.tests[0].feedback == "sent more than 8.0 MiB of requests in one test", report.tests[0].feedback


HOG = """
import json, os, struct

HEAD = json.dumps({"op": "free", "bufs": [], "arrays": []}).encode()
FLOOD = (struct.pack(">II", len(HEAD), 0) + HEAD) * (8_000_000 // len(HEAD))  # just under the 8 MiB a test


def forward(chip, **kw):
    data = memoryview(FLOOD)
    while data:
        data = data[os.write(chip.link.fd_out, data) :]
    raise RuntimeError("flooded")
"""


def test_classmates_flooding_the_grader_cost_an_honest_submission_no_time(tmp_path):
    # before: a test's time was wall clock; four floods under the cap, graded beside it (--jobs 5), held the GIL its
    # grading thread shares, and the master timed out on the memory test it passes alone in 0.7 s (red team 104)
    hogs = [tmp_path / f"hog{k}.py" for k in range(4)]
    for hog in hogs:
        hog.write_text(HOG)
    master = tmp_path / "master.py"
    master.write_text(spec.locate("02").read_text())
    memory = spec.load(spec.locate("02"))
    memory = replace(memory, tests=memory.tests[-1:])
    assert memory.tests[0]["check"] == "memory"
    reports = grader.grade(memory, [*hogs, master], seed=1, jobs=5, limits=sandbox.Limits(wall_s=2.0))
    assert reports[-1].tests[0].status == "passed", reports[-1].tests[0].feedback
    for hog in reports[:4]:  # stopped by its own time (its CPU and the grader's decoding its flood), or at its end
        said = hog.tests[0].feedback
        assert said == "did not finish within 2 s (its CPU time, the grader's for it, its sleeps)" or said.startswith(
            "raised RuntimeError: flooded (line 12, in forward)"
        ), said


def test_a_submission_that_sleeps_is_charged_its_sleep(tmp_path):
    # before: a test's time was CPU time alone, its wall clock 5× that: sleeping 49 s a test held a grading slot for
    # 8 minutes and scored 100 (red team 109)
    path = tmp_path / "sleeps.py"
    path.write_text(
        spec.locate("02")
        .read_text()
        .replace("    N, d = chip.hbm.tensors", "    __import__('time').sleep(3)\n    N, d = chip.hbm.tensors", 1)
    )
    assert "sleep(3)" in path.read_text()
    (report,) = grader.grade(first_tests(spec.load(spec.locate("02")), 1), [path], seed=1, jobs=1, limits=FAST)
    assert report.tests[0].feedback == "did not finish within 1 s (its CPU time, the grader's for it, its sleeps)"
