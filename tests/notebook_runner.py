"""Run a lesson notebook the way a student would, unsolved or with the reference solutions put in.

An exercise is a code cell tagged `exercise:NAME`; `lessons/solutions/NN_name.py` holds, for each, a
block that starts with the line `# %% exercise:NAME` and replaces the cell's source in a solved run.
Two cells are added around the lesson: one first, that notes every figure drawn (shown inline or saved)
whose axes lack a label with a unit in parentheses, and one last, that prints what it found. `retry` runs a
lesson once and then each of many answers to its exercises, each with its exercise's check cell.
"""

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

LESSONS_DIR = Path(__file__).parent.parent / "lessons"
SOLUTIONS_DIR = LESSONS_DIR / "solutions"
TAG = "exercise:"
CHECK_LINE = re.compile(r"^(✓|✗|…) (.+)$", re.M)
UNLABELLED = "unlabelled axes:"

_WATCH_FIGURES = """\
def _flashsim_watch_figures():
    from matplotlib.backend_bases import FigureCanvasBase
    print_figure = FigureCanvasBase.print_figure
    def checked(canvas, *args, **kwargs):
        for ax in canvas.figure.axes:
            for label in (ax.get_xlabel(), ax.get_ylabel()):
                if ax.has_data() and "(" not in label:
                    _flashsim_unlabelled.append(label or "no label")
        return print_figure(canvas, *args, **kwargs)
    FigureCanvasBase.print_figure = checked
_flashsim_unlabelled = []
_flashsim_watch_figures()
"""
_REPORT_FIGURES = f'print("{UNLABELLED}", sorted(set(_flashsim_unlabelled)))'


def lessons() -> list[Path]:
    """The course's notebooks, in order."""
    return sorted(LESSONS_DIR.glob("[0-9][0-9]_*.ipynb"))


def exercise_name(cell) -> str | None:
    """NAME of a cell tagged `exercise:NAME`, else None."""
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith(TAG):
            return tag[len(TAG) :]
    return None


def solutions(lesson: Path) -> dict[str, str]:
    """The reference solution of each exercise of `lesson`, by name."""
    path = SOLUTIONS_DIR / f"{lesson.stem}.py"
    blocks = re.split(rf"^# %% {TAG}(\S+)\s*$", path.read_text(), flags=re.M)
    return {name: source.strip() + "\n" for name, source in zip(blocks[1::2], blocks[2::2], strict=True)}


def execute(lesson: Path, solved: bool, timeout: int = 120, answers: dict[str, str] | None = None):
    """The executed notebook (nbformat), after running it top to bottom in a fresh kernel; `answers` (by exercise
    name) replace the exercise cells, solved or not."""
    nb = nbformat.read(lesson, as_version=4)
    if solved or answers:
        answers = answers or solutions(lesson)
        for cell in nb.cells:
            name = exercise_name(cell)
            if name in answers:
                cell.source = answers[name]
    nb.cells.insert(0, nbformat.v4.new_code_cell(_WATCH_FIGURES))
    nb.cells.append(nbformat.v4.new_code_cell(_REPORT_FIGURES))
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(lesson.parent)}}
    )
    client.execute()
    return nb


def outputs(nb, stream: str = "stdout") -> str:
    """Everything the notebook's cells printed on one stream."""
    return "".join(
        o.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == stream
    )


def retry(lesson: Path, answers: list[tuple[str, str]], timeout: int = 120) -> list[str]:
    """What the check cell of each exercise printed with each answer (exercise name, source) put in: the lesson runs
    top to bottom unsolved in one kernel, then each answer's source, each followed by its exercise's check cell."""
    nb = nbformat.read(lesson, as_version=4)
    checks = {}
    for i, cell in enumerate(nb.cells):
        if exercise_name(cell):
            checks[exercise_name(cell)] = next(c.source for c in nb.cells[i + 1 :] if c.cell_type == "code")
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(lesson.parent)}}
    )
    printed = []
    with client.setup_kernel():
        for i, cell in enumerate(list(nb.cells)):
            if cell.cell_type == "code":
                client.execute_cell(cell, i)
        for name, source in answers:
            cells = [nbformat.v4.new_code_cell(source), nbformat.v4.new_code_cell(checks[name])]
            for cell in cells:
                nb.cells.append(cell)
                client.execute_cell(cell, len(nb.cells) - 1)
            printed.append(outputs(nbformat.v4.new_notebook(cells=cells)))
    return printed
