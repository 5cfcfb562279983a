"""The lessons' hints and feedback: hints in steps that never hold the solution's code, and a ✗ that names
the variable or tensor and says what to look at, for two typical wrong answers to every exercise of every lesson,
and the exact lines for more wrong answers (None, a float count, a list, float32, an input changed in place…)."""

import re
import tomllib

import pytest

nbformat = pytest.importorskip("nbformat", reason="the lessons' tests need the dev extra (nbformat, nbclient)")
from lesson_mistakes import MISTAKES, MORE_MISTAKES
from notebook_runner import CHECK_LINE, LESSONS_DIR, execute, exercise_name, lessons, outputs, retry, solutions

HINTS = LESSONS_DIR / "hints"
COURSE = lessons()  # every lesson: a new one cannot skip its hints and mistakes


def exercises(lesson):
    return {exercise_name(c): c.source for c in nbformat.read(lesson, as_version=4).cells if exercise_name(c)}


def statements(lesson) -> dict[str, str]:
    """What each exercise gives the student: the markdown above its cell and the cell itself (names, signature)."""
    given, text = {}, ""
    for c in nbformat.read(lesson, as_version=4).cells:
        if c.cell_type == "markdown":
            text = c.source
        elif exercise_name(c):
            given[exercise_name(c)] = re.sub(r"\s+", "", text + c.source)
    return given


def code_fragments(solution: str) -> list[str]:
    """Each line of a solution as code, spaces removed, and its right-hand side: what a hint must not hold."""
    out = []
    for line in solution.splitlines():
        code = line.split("#")[0].strip()
        if not code or code.startswith(("def ", '"""', "import ", "from ")):
            continue
        out.append(code)
        rhs = re.split(r"^return\s+|^[\w̃, ]+=\s*", code)[-1]
        out.append(rhs)
    return [re.sub(r"\s+", "", f) for f in out if len(re.sub(r"\s+", "", f)) >= 8]


def test_every_lesson_has_two_typical_wrong_answers_to_each_exercise():
    assert sorted(MISTAKES) == [p.stem for p in COURSE]
    for lesson in COURSE:
        for which, mistakes in enumerate(MISTAKES[lesson.stem]):
            assert sorted(mistakes) == sorted(exercises(lesson)), f"{lesson.stem} mistake {which + 1}"
        assert len(MISTAKES[lesson.stem]) == 2, lesson.stem


def test_every_exercise_of_every_lesson_has_hints_in_steps():
    for lesson in COURSE:
        table = tomllib.loads((HINTS / f"{lesson.stem}.toml").read_text())
        assert sorted(table) == sorted(exercises(lesson)), lesson.name
        for name, entry in table.items():
            assert len(entry["steps"]) >= 3, f"{lesson.name} {name}: a question, the idea, the shape of the code"
            assert entry["steps"][0].rstrip().endswith("?") or "?" in entry["steps"][0], f"{name}: step 1 asks"


@pytest.mark.parametrize("lesson", COURSE, ids=lambda p: p.stem)
def test_no_hint_or_stub_holds_the_solutions_code(lesson):
    table = tomllib.loads((HINTS / f"{lesson.stem}.toml").read_text())
    stubs, given = exercises(lesson), statements(lesson)
    for name, solution in solutions(lesson).items():
        fragments = [f for f in code_fragments(solution) if f not in given[name]]  # the statement's own names
        assert fragments, f"{name}: the solution has code lines to compare with"
        stub = re.search(r"NotImplementedError\((.*)\)", stubs[name], re.S).group(1)
        for text in [*table[name]["steps"], stub]:
            flat = re.sub(r"\s+", "", text)
            leaked = [f for f in fragments if f in flat]
            assert not leaked, f"{lesson.stem} {name}: a hint holds the solution's code {leaked}"


def test_the_comparison_catches_a_leak():
    fragments = code_fragments("def f(m, x):\n    m_new = np.maximum(m, x)  # line 11\n    return m_new * 2\n")
    assert "np.maximum(m,x)" in fragments and "m_new=np.maximum(m,x)" in fragments
    assert any(f in re.sub(r"\s+", "", "write m_new = np.maximum(m, x) first") for f in fragments)


@pytest.mark.parametrize("which", [0, 1], ids=["mistake1", "mistake2"])
@pytest.mark.parametrize("lesson", COURSE, ids=lambda p: p.stem)
def test_a_typical_wrong_answer_gets_a_named_actionable_cross(lesson, which):
    mistakes = MISTAKES[lesson.stem][which]
    nb = execute(lesson, solved=False, answers={name: source for name, (source, _) in mistakes.items()})
    crosses = [b for b in re.findall(r"^✗ .*(?:\n    .*)?", outputs(nb), re.M)]  # a verdict and its code line
    for name, (_, phrases) in mistakes.items():
        assert any(all(p in b for p in phrases) for b in crosses), (
            f"{lesson.stem} {name}: no ✗ with {phrases} in:\n" + ("\n".join(crosses))
        )


@pytest.mark.parametrize("lesson", sorted(MORE_MISTAKES))
def test_more_answers_get_their_exact_lines(lesson):
    """None, a float count, a list, a bool, the wrong order, float32, a transposed table, an input changed in place
    (and run again): each check prints these lines, no other, each naming what differed."""
    answers = MORE_MISTAKES[lesson]
    printed = retry(LESSONS_DIR / f"{lesson}.ipynb", [(name, source) for name, source, _ in answers])
    for (name, source, lines), out in zip(answers, printed, strict=True):
        assert [m.group(0) for m in CHECK_LINE.finditer(out)] == lines, f"{lesson} {name}:\n{source}\n{out}"
