"""Every assignment, graded end to end: the master scores full marks, the stub zero, wasteful answers lose the IO marks."""

from dataclasses import replace
from pathlib import Path

import pytest
from grading_submissions import variants

from sim.grading import export, grader, spec

SUBMISSIONS = Path(__file__).parent / "grading_submissions"
SIMULATED = ["01", "02", "03", "04"]


def grade_one(assignment, path, **kw):
    (report,) = grader.grade(assignment, [Path(path)], seed=kw.pop("seed", 11), jobs=1, **kw)
    return report


def by_name(report):
    return {t.name: t for t in report.tests}


@pytest.mark.parametrize("name", SIMULATED)
def test_the_master_scores_full_marks(name):
    assignment = spec.load(spec.locate(name))
    report = grade_one(assignment, assignment.path)
    assert [t.status for t in report.tests] == ["passed"] * len(assignment.tests), [t.feedback for t in report.tests]
    assert report.score == report.max_score == assignment.points == 100
    assert not report.flags


@pytest.mark.parametrize("name", SIMULATED)
def test_the_exported_stub_scores_zero_and_says_what_is_missing(name, tmp_path):
    master = spec.locate(name)
    stub = export.export(master, student=tmp_path)
    report = grade_one(spec.load(master), stub)
    assert report.score == 0 and len(report.tests) == len(spec.load(master).tests)
    assert all(t.feedback.startswith("not implemented yet: ") and len(t.feedback) > 30 for t in report.tests)


def test_the_gpu_assignment_is_skipped_with_one_line_where_there_is_no_gpu():
    import gpu

    if gpu.available()[0]:
        pytest.skip("this machine has a GPU: the GPU path is graded for real (tests marked gpu)")
    assignment = spec.load(spec.locate("05"))
    report = grade_one(assignment, assignment.path)
    assert {t.status for t in report.tests} == {"skipped"} and report.score == 0
    assert len(report.notes) == 1 and report.notes[0].startswith(
        "not graded here: 05_gpu_online_softmax needs an NVIDIA GPU"
    )


def io_tests(assignment, *also):
    """The assignment with its IO tests (and the named others) only."""
    keep = tuple(t for t in assignment.tests if t["check"] == "io" or t["name"] in also)
    return replace(assignment, tests=keep)


@pytest.mark.parametrize(
    "submission, message",
    [
        ("fa2_loop_order", "correct, but K and V were read {t} times each where Algorithm 1 reads them once"),
        (
            "REREAD_KV",
            "correct, but K and V were read {t} times each where Algorithm 1 reads them once — check your loop order",
        ),
        ("WRITE_S", "correct, but S was written once where Algorithm 1 never writes it"),
    ],
)
def test_io_wasteful_answers_to_assignment_2_lose_the_io_marks(submission, message, tmp_path):
    assignment = io_tests(spec.load(spec.locate("02")), "ragged blocks, fp16")
    path = (
        SUBMISSIONS / "02" / f"{submission}.py" if submission.islower() else variants.algorithm1(tmp_path, submission)
    )
    report = grade_one(assignment, path)
    tests = by_name(report)
    assert tests["ragged blocks, fp16"].status == "passed"
    for name in ("IO against Algorithm 1", "IO, N ≠ Nk"):
        t = tests[name]
        case = dict(part.split("=") for part in t.case.split(", ") if "=" in part)
        Tr = -(-int(case["N"]) // int(case["Br"]))
        assert (t.status, t.points) == ("failed", 0.0), t.feedback
        assert t.feedback.startswith(message.format(t=Tr)), t.feedback


def mutated(tmp_path, name: str, old: str | tuple, new: str | tuple) -> tuple[Path, object]:
    """The master of `name` with `old` (which must be there; or each of a tuple) replaced by `new`, and the master's
    spec."""
    master = spec.locate(name)
    text = master.read_text()
    for o, n in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,))), strict=True):
        assert o in text
        text = text.replace(o, n)
    path = tmp_path / "mutated.py"
    path.write_text(text)
    return path, spec.load(master)


@pytest.mark.parametrize(
    "name, old, new, label, hint",
    [
        ("03", ("                break  # this block", "        if last_key < 0:"),
         ("                pass  # this block", "        if False:"),
         "FlashAttention-2 with causal block skipping", "skip the K/V blocks no row of Q_i may see"),
        ("04", "            if causal and c0 > r1 - 1 + Nk - N:\n                continue",
         "            if False:\n                continue",
         "FlashAttention-2's backward with causal block skipping", "skip the Q blocks the causal mask hides"),
    ],
)  # fmt: skip
def test_a_causal_pass_that_skips_no_block_loses_the_io_marks(tmp_path, name, old, new, label, hint):
    path, assignment = mutated(tmp_path, name, old, new)
    for t in grade_one(io_tests(assignment), path).tests:
        assert t.points == 0.0 and t.feedback.startswith("correct, but "), t.feedback
        assert " were read " in t.feedback and f"where {label} reads them" in t.feedback and hint in t.feedback


def test_loading_a_q_block_that_sees_no_key_costs_its_bytes(tmp_path):
    """Causal, N > Nk: the rows r < N − Nk see no key; FlashAttention-2 never loads a Q block of such rows alone
    (helper 101: skipping it had cost an honest submission 1.65 of 10 points and a review note)."""
    path, assignment = mutated(tmp_path, "03", "        if last_key < 0:", "        if False:")
    (t,) = grade_one(replace(assignment, tests=(assignment.tests[-2],)), path).tests
    case = dict(part.split("=") for part in t.case.split(", ") if "=" in part)
    N, Nk, d, Br = (int(case[k]) for k in ("N", "Nk", "d", "Br"))
    blind = Br * ((N - Nk) // Br)  # the rows of the blocks whose last row, i·Br + Br − 1 + Nk − N, is below key 0
    optimum = 2 * (N - blind) * d + 2 * 2 * d * sum(min(Nk, -(-(r + Br + Nk - N) // 16) * 16)  # Q, K/V (Bc 16)
                                                   for r in range(blind, N, Br)) + 2 * N * d + 4 * N  # O, L  # fmt: skip
    assert (t.name, t.status, blind > 0) == ("IO, causal, N > Nk", "partial", True)
    assert t.hbm_bytes == optimum + 2 * blind * d  # the blind blocks' Q_i, bf16
    assert t.feedback.startswith(
        f"correct, but Q was read once where FlashAttention-2 with causal block skipping reads it {(N - blind) / N:.2f} "
        "times — load Q_i once per outer iteration (not at all where no row of it sees a key)"
    ), t.feedback


def test_keeping_an_n_by_nk_array_off_chip_fails_the_memory_test(tmp_path):
    assignment = spec.load(spec.locate("02"))
    memory = replace(assignment, tests=tuple(t for t in assignment.tests if t["check"] == "memory"))
    (t,) = grade_one(memory, variants.algorithm1(tmp_path, "KEEP_S")).tests
    assert t.status == "failed" and t.points == 0
    assert t.feedback.startswith("correct, but your process held ")
    assert "one N × Nk float32 matrix here is 4.0 MiB" in t.feedback
    (honest,) = grade_one(memory, SUBMISSIONS / "02" / "algorithm1.py").tests
    assert honest.status == "passed", honest.feedback


def test_keeping_s_whole_in_hbm_fails_the_memory_test():
    """Standard attention done tile by tile within the SRAM (red team 104): S, N × Nk float32, kept in the grader's
    HBM had passed the memory test, which read the process's memory only."""
    assignment = spec.load(spec.locate("02"))
    memory = replace(assignment, tests=tuple(t for t in assignment.tests if t["check"] == "memory"))
    (t,) = grade_one(memory, SUBMISSIONS / "02" / "keeps_s_in_hbm.py").tests
    N, Nk = (int(x.split("=")[1]) for x in t.case.split(", ")[:2])
    assert (t.status, t.points) == ("failed", 0)
    assert t.feedback == (
        f"correct, but you kept S ({N}, {Nk}) in HBM: half an N × Nk matrix or more, which FlashAttention never "
        "writes — keep S and P tile by tile in SRAM"
    )


def test_an_output_allocated_twice_is_refused():
    """Red team 109: S kept in O's name (N × Nk), O allocated again (N × d) before the end, passed the HBM check."""
    assignment = spec.load(spec.locate("02"))
    memory = replace(assignment, tests=tuple(t for t in assignment.tests if t["check"] == "memory"))
    (t,) = grade_one(memory, SUBMISSIONS / "02" / "keeps_s_in_o.py").tests
    assert (t.status, t.points) == ("failed", 0)
    assert t.feedback == "refused: hbm.alloc: O is in HBM already; allocate each tensor once"


def test_an_online_softmax_without_the_shift_fails_on_large_logits(tmp_path):
    naive = "return m_new, np.exp(np.log(ℓ) + m - m_new) + np.exp(x) / np.exp(m_new)"
    path, assignment = mutated(tmp_path, "01", "return m_new, ℓ * np.exp(m - s) + np.exp(x - s)", naive)
    tests = by_name(grade_one(assignment, path))
    assert tests["update, a few logits"].status == "passed"
    big = tests["update, logits in the thousands"]
    assert big.status == "failed" and "where the reference is" in big.feedback, big.feedback


def test_every_submission_of_a_run_gets_the_same_cases_and_the_seed_reproduces_them():
    assignment = spec.load(spec.locate("02"))
    a, b = grader.grade(
        assignment, [SUBMISSIONS / "02" / "algorithm1.py", SUBMISSIONS / "02" / "fa2_loop_order.py"], seed=5, jobs=2
    )
    again = grade_one(assignment, SUBMISSIONS / "02" / "fa2_loop_order.py", seed=5)
    other = grade_one(assignment, SUBMISSIONS / "02" / "fa2_loop_order.py", seed=6)
    assert [t.case for t in a.tests] == [t.case for t in b.tests] == [t.case for t in again.tests]
    assert [(t.points, t.status) for t in b.tests] == [(t.points, t.status) for t in again.tests]
    assert [t.feedback for t in b.tests if t.name != "no N × Nk matrix"] == [
        t.feedback for t in again.tests if t.name != "no N × Nk matrix"
    ]  # the memory peak moves by a few hundred bytes with the pipe's timing
    assert [t.case for t in other.tests] != [t.case for t in b.tests]
