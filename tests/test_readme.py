"""The README's two commands are the ones CI runs and the ones that set a fresh machine up."""

from pathlib import Path

import sim

ROOT = Path(__file__).resolve().parent.parent
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest"
DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/flashsim walkthrough"


def test_readme_gives_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert TEST_COMMAND in readme and DEMO_COMMAND in readme


def test_ci_runs_exactly_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert TEST_COMMAND in script


def test_readme_python_example_runs_as_written():
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    names: dict = {}
    exec(compile(example, "README.md", "exec"), names)  # the README's own example
    r, g = names["r"], names["g"]
    assert any(line.current and "chip.step(" in line.text for line in sim.machine.source.around(r.trace.steps[3]))
    assert r.output.shape == (1000, 64) and r.lse.shape == (1000,) and r.trace.steps[3].line is not None
    assert g.dq.shape == g.dk.shape == g.dv.shape == (1000, 64) and g.hardware.name == "H100-SXM"
