"""Where the course's files are: the lessons, their solutions and the assignments' masters.

In a source checkout they are `lessons/` beside `sim/`; in an install (a wheel, `pip install .`) they are the package
`flashsim_lessons`, which the build makes from that same folder (setup.py).
"""

from importlib.util import find_spec
from pathlib import Path

from sim.core.errors import InputError

INSTALLED = "flashsim_lessons"


def root() -> Path:
    """The folder that holds the lessons (NN_name.ipynb), solutions/ and assignments/."""
    checkout = Path(__file__).resolve().parents[2] / "lessons"
    if checkout.is_dir():
        return checkout
    spec = find_spec(INSTALLED)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    raise InputError(f"lessons: neither {checkout} nor the package {INSTALLED} is here; reinstall flashsim")


def assignments() -> Path:
    """The folder of the assignments' masters."""
    return root() / "assignments"


def lessons() -> list[Path]:
    """Every lesson notebook, in order."""
    return sorted(root().glob("[0-9][0-9]_*.ipynb"))
