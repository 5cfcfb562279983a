"""What pyproject.toml cannot say: lessons/ ships as the package `flashsim_lessons`, beside sim and gpu, so that an
install has the lessons, their hints and the assignments; the assignments it ships are the student copies, each made
here from its master by `sim.grading.export.student_text` (solutions made stubs, hidden tests dropped), and the
lessons' worked answers (`solutions/`) stay out, as some are a graded assignment's solution (lesson 3's
`online_update` is assignment 01's `update`). The masters and answers stay in the checkout: one source, no copy
committed. The sdist is made the same way. `sim.lab.course` tells a checkout's masters from an install's copies."""

import shutil
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

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


class StudentSdist(sdist):
    """sdist whose tree holds the student copies in place of the masters, and no lessons/solutions/: PyPI serves an
    sdist beside the wheel, and a wheel built from it (the copies made again) is the same."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        shutil.rmtree(Path(base_dir) / "lessons" / "solutions", ignore_errors=True)
        for copy in (Path(base_dir) / "lessons" / "assignments").glob("[0-9][0-9]_*.py"):
            text = student_text((MASTERS / copy.name).read_text(encoding="utf-8"), copy.name)
            copy.unlink()  # the tree's files may be hard links to the checkout's: never write through one
            copy.write_text(text, encoding="utf-8")


setup(
    packages=[*find_packages(include=["sim", "sim.*", "gpu", "gpu.*"]), "flashsim_lessons"],
    package_dir={"flashsim_lessons": "lessons"},
    cmdclass={"build_py": StudentCopies, "sdist": StudentSdist},
)
