"""What pyproject.toml cannot say: lessons/ ships as the package `flashsim_lessons`, beside sim and gpu, so that an
install has the lessons, their self-study answers (`solutions/`, which are not graded) and the assignments; and the
assignments it ships are the student copies, each made here from its master by `sim.grading.export.student_text`
(solutions made stubs, hidden tests dropped). The masters stay in the checkout: one source, no copy committed.
`sim.lab.course` tells a checkout's masters from an install's student copies."""

import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
MASTERS = HERE / "lessons" / "assignments"
sys.path.insert(0, str(HERE))  # the build's environment holds setuptools only: export needs the standard library
from sim.grading.export import student_text  # noqa: E402


class StudentCopies(build_py):
    """build_py that writes each master's student copy where the master would have been copied."""

    def copy_file(self, infile, outfile, *args, **kwargs):
        source = Path(infile).resolve()
        if source.parent != MASTERS or not source.match("[0-9][0-9]_*.py"):
            return super().copy_file(infile, outfile, *args, **kwargs)
        Path(outfile).write_text(student_text(source.read_text(encoding="utf-8"), source.name), encoding="utf-8")
        return outfile, True


setup(
    packages=[*find_packages(include=["sim", "sim.*", "gpu", "gpu.*"]), "flashsim_lessons"],
    package_dir={"flashsim_lessons": "lessons"},
    cmdclass={"build_py": StudentCopies},
)
