"""Where the course's files are: the lessons, their solutions and the assignments.

In a source checkout they are `lessons/` beside `sim/`, and `lessons/assignments/` holds the masters (solutions and
hidden tests). In an install (a wheel, `pip install .`) they are the package `flashsim_lessons`, which the build makes
from that same folder (setup.py), with the assignments' student copies in place of the masters: a student who
installs flashsim gets no solution and no hidden test. What needs a master (grading, the instructor's export) is
refused an installed copy, with a line that says where the masters are.
"""

from importlib.util import find_spec
from pathlib import Path

from sim.core.errors import InputError

INSTALLED = "flashsim_lessons"
CHECKOUT = Path(__file__).resolve().parents[2] / "lessons"


def root() -> Path:
    """The folder that holds the lessons (NN_name.ipynb), solutions/ and assignments/."""
    if CHECKOUT.is_dir():
        return CHECKOUT
    spec = find_spec(INSTALLED)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    raise InputError(f"lessons: neither {CHECKOUT} nor the package {INSTALLED} is here; reinstall flashsim")


def masters_here() -> bool:
    """Whether assignments/ holds the masters (a checkout) rather than their student copies (an install)."""
    return root() == CHECKOUT


def assignments() -> Path:
    """The folder of the assignments: the masters in a checkout, their student copies in an install."""
    return root() / "assignments"


def needs_master(path: Path, label: str, need: str) -> Path:
    """`path`, unless it is one of an install's student copies: then InputError, naming `label`, saying that `need`
    needs the master file from a checkout."""
    if not masters_here() and Path(path).resolve().parent == assignments().resolve():
        raise InputError(
            f"{label}: this install of flashsim holds the assignments' student copies only; {need} needs the master"
            f" file, from a checkout of flashsim (give its path)"
        )
    return path


def lessons() -> list[Path]:
    """Every lesson notebook, in order."""
    return sorted(root().glob("[0-9][0-9]_*.ipynb"))
