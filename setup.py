"""The one thing pyproject.toml cannot say: lessons/ ships as the package `flashsim_lessons`, beside sim and gpu, so
that a wheel install has the lessons, the assignments and their masters (`sim.lab.course` finds them either way)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["sim", "sim.*", "gpu", "gpu.*"]), "flashsim_lessons"],
    package_dir={"flashsim_lessons": "lessons"},
)
