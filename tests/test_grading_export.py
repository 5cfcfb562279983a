"""The student's copy of every master holds no solution and no hidden test; the instructor's is the master."""

import ast
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.cli import app
from sim.core.errors import InputError
from sim.grading import export, gradescope, spec

MASTERS = spec.masters()


def test_there_are_eight_assignments():
    assert [m.name[:2] for m in MASTERS] == ["01", "02", "03", "04", "05", "06", "07", "08"]


@pytest.mark.parametrize("master", MASTERS, ids=lambda m: m.stem)
def test_the_student_copy_has_stubs_and_public_tests_only(master, tmp_path):
    text = master.read_text()
    student = export.export(master, student=tmp_path)
    copy = student.read_text()
    solution = export.solutions(text)
    assert len(solution) >= 3
    statement = spec.load(master).statement  # public by design: it may quote a signature the solution repeats
    for line in solution:
        if len(line) >= 12 and line not in statement:
            assert line not in copy, line
    assert "BEGIN SOLUTION" not in copy and "END SOLUTION" not in copy and "HIDDEN" not in copy
    full, public = spec.load(master), spec.load(student)
    assert [t for t in full.tests if t["visibility"] == "public"] == list(public.tests)
    for t in full.tests:
        if t["visibility"] == "hidden":
            assert f'"name": "{t["name"]}"' in text and f'"name": "{t["name"]}"' not in copy
    tree = ast.parse(copy)
    stubs = [n for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    assert stubs and all(isinstance(n.exc, ast.Call) and n.exc.func.id == "NotImplementedError" for n in stubs)
    assert all(len(n.exc.args[0].value) > 10 for n in stubs)  # each with a hint
    assert public.statement == full.statement and "How to check yourself" in public.statement


def test_the_instructor_copy_is_the_master_and_an_autograder_folder(tmp_path):
    master = spec.locate("02")
    copy = export.export(master, instructor=tmp_path)
    assert copy.read_bytes() == master.read_bytes()
    folder = tmp_path / "autograder"
    assert sorted(p.name for p in folder.iterdir()) == ["02_flash1_forward.py", "run_autograder", "setup.sh"]
    run = (folder / "run_autograder").read_text()
    assert "--gradescope /autograder/results/results.json --hidden-visibility hidden" in run
    assert run.endswith(" -- 02_flash1_forward.py /autograder/submission\n")
    assert (folder / "run_autograder").stat().st_mode & 0o111


@pytest.mark.parametrize("name, extra", [("02", ""), ("07", "[assignments-triton]"), ("08", "[assignments-triton]")])
def test_the_autograder_installs_the_extra_its_driver_needs(tmp_path, name, extra):
    export.export(spec.locate(name), instructor=tmp_path)
    setup = (tmp_path / "autograder" / "setup.sh").read_text()
    assert (
        setup.splitlines()[-1] == f'/autograder/venv/bin/pip install "$(ls /autograder/source/flashsim-*.whl){extra}"'
    )


FAKE_PYTHON = """#!/bin/sh
echo "$(basename "$0") $*" >> "$LOG"
if [ "$1" = -c ]; then exit "$OLD"; fi  # the version check: 1 where python3 is older than 3.11
mkdir -p "$3/bin" && printf '#!/bin/sh\\necho "pip $*" >> "$LOG"\\n' > "$3/bin/pip" && chmod +x "$3/bin/pip"
"""


@pytest.mark.parametrize("old", [True, False])
def test_the_autograder_setup_installs_a_python_flashsim_runs_on(tmp_path, old):
    """Ubuntu 22.04's python3 is 3.10, which the wheel refuses (requires-python >= 3.11): red team 96."""
    export.export(spec.locate("02"), instructor=tmp_path)
    root, tools = tmp_path / "autograder_root", tmp_path / "bin"
    (root / "source").mkdir(parents=True)
    (root / "source" / "flashsim-9.9-py3-none-any.whl").touch()
    tools.mkdir()
    for name, text in (("apt-get", '#!/bin/sh\necho "apt-get $*" >> "$LOG"\n'), ("python3", FAKE_PYTHON),
                       ("python3.11", FAKE_PYTHON.replace('exit "$OLD"', "exit 0"))):  # fmt: skip
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    script = (tmp_path / "autograder" / "setup.sh").read_text().replace("/autograder", str(root))
    log = tmp_path / "log"
    env = {"PATH": f"{tools}:/usr/bin:/bin", "LOG": str(log), "OLD": str(int(old))}
    subprocess.run(["bash", "-c", script], env=env, check=True, timeout=60)
    python = "python3.11" if old else "python3"
    expected = ["apt-get update", "apt-get install -y python3 python3-venv python3-pip",
                "python3 -c import sys; sys.exit(sys.version_info < (3, 11))",
                *(["apt-get install -y python3.11 python3.11-venv"] if old else []),
                f"{python} -m venv {root}/venv", f"pip install {root}/source/flashsim-9.9-py3-none-any.whl"]  # fmt: skip
    assert log.read_text().splitlines() == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("x = 1\n    # BEGIN SOLUTION\n    y = 2\n", "never closed"),
        ("x = 1\n# END SOLUTION\n", "END marker with no BEGIN"),
        ("TESTS = [\n# BEGIN HIDDEN TESTS\n", "never closed"),
    ],
)
def test_broken_markers_are_refused(text, message):
    with pytest.raises(InputError, match=message):
        export.student_text(text)


def test_one_line_solutions_become_stubs():
    text = "def f(x):\n    return x + 1  # SOLUTION: add one\n"
    assert export.student_text(text) == "def f(x):\n    raise NotImplementedError('add one')\n"


def test_export_needs_exactly_one_destination(tmp_path):
    with pytest.raises(InputError, match="exactly one of --student DIR or --instructor DIR"):
        export.export(spec.locate("01"), student=tmp_path, instructor=tmp_path)
    with pytest.raises(InputError, match="no file or assignment named '09'"):
        spec.locate("09")


def test_a_spec_with_a_bad_test_is_refused_with_the_field_named(tmp_path):
    bad = tmp_path / "07_bad.py"
    bad.write_text('GRADING = {"driver": "chip", "entry": "f", "algorithm": "flash1", '
                   '"outputs": {"O": "input", "ℓ": "fp32", "m": "fp32"}}\n'
                   'TESTS = [{"name": "t", "visibility": "public", "points": 5, "check": "speed"}]\n')  # fmt: skip
    with pytest.raises(InputError, match="test 't': check must be one of output, io, memory"):
        spec.load(bad)
    Path(bad).write_text("GRADING = {}\nTESTS = []\n")
    with pytest.raises(InputError, match="driver"):
        spec.load(bad)


def test_a_students_copy_into_the_masters_own_folder_is_refused_and_the_master_kept(tmp_path):
    # before: the student's copy was written over the master, its solution and hidden tests gone (red team h72)
    master = tmp_path / "02_flash1_forward.py"
    master.write_bytes(spec.locate("02").read_bytes())
    before = master.read_bytes()
    result = CliRunner().invoke(app, ["assignments", "export", str(master), "--student", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "is the master itself; export into another folder" in result.output
    assert master.read_bytes() == before


MASTER_BYTES = spec.locate("02").read_bytes()
MASTER_02 = MASTER_BYTES.decode("utf-8").splitlines()
MARKER_LINES = [n for n, line in enumerate(MASTER_02) if line.lstrip().startswith(("# BEGIN ", "# END "))]


@st.composite
def misspelt_marker(draw):
    """A marker line of master 02 with its marker misspelt: case, spacing, a singular TEST, no space after #."""
    number = draw(st.sampled_from(MARKER_LINES))
    line = MASTER_02[number]
    indent, rest = line[: len(line) - len(line.lstrip())], line.lstrip()
    words = rest[2:].split(":")[0].split()
    words[-1] = draw(st.sampled_from([words[-1], words[-1].rstrip("S")]))
    words = ["".join(draw(st.sampled_from([c.lower(), c.upper()])) for c in w) for w in words]
    gaps = [draw(st.sampled_from(["", " ", "  ", "\t", "_"])) for _ in words]
    marker = "#" + gaps[0] + "".join(w + g for w, g in zip(words, [*gaps[1:], ""], strict=True))
    hint = rest[len(rest.split(":")[0]) :]
    return number, indent + marker + hint, line


@given(misspelt_marker())
@settings(max_examples=200)
def test_a_misspelt_marker_is_refused_naming_its_line(case):
    # before: "# BEGIN HIDDEN TEST", "#BEGIN HIDDEN TESTS", lower case… were copied through as comments, and what they
    # were meant to hide (a solution, the hidden tests) went into the student's copy with them (red team W2)
    number, misspelt, line = case
    assume(misspelt != line)
    text = "\n".join([*MASTER_02[:number], misspelt, *MASTER_02[number + 1 :]]) + "\n"
    with pytest.raises(InputError, match=f"^02 line {number + 1}: .* looks like a marker but is not one"):
        export.student_text(text, "02")


def test_a_hidden_test_outside_the_markers_is_refused_naming_its_line():
    text = "\n".join(line for line in MASTER_02 if "HIDDEN TESTS" not in line) + "\n"
    first = next(n for n, line in enumerate(text.splitlines(), 1) if '"visibility": "hidden"' in line)
    with pytest.raises(InputError, match=f"^02 line {first}: test 'N ≠ Nk, bf16' is 'hidden' and outside"):
        export.student_text(text, "02")
    public = text.replace('"visibility": "hidden"', '"visibility": "public"')
    assert export.student_text(public, "02").count('"visibility": "public"') == 8  # made public: the copy keeps them


def test_a_student_copy_that_would_not_parse_is_refused_naming_the_masters_line():
    text = "x = 1\n\n\ndef f():\n# BEGIN SOLUTION: indented too little\n    return x\n# END SOLUTION\n"
    with pytest.raises(InputError, match=r"^m line 5: its student copy would not be Python \(expected an indented"):
        export.student_text(text, "m")


FILE_NAMES = st.one_of(
    st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=40),
    st.binary(min_size=1, max_size=40).filter(lambda b: b"/" not in b and b"\x00" not in b).map(os.fsdecode),
).map(lambda name: name + ".py")


@given(FILE_NAMES)
@settings(max_examples=80, deadline=None)
def test_run_autograder_hands_the_shell_the_masters_exact_name(name):
    # before: the name was written into the script unquoted: a space made it two arguments, a quote broke the
    # script, a leading "-" made it an option (red team C2)
    with tempfile.TemporaryDirectory() as tmp:
        master = Path(tmp) / name
        master.write_bytes(MASTER_BYTES)
        gradescope.write_autograder(Path(tmp) / "autograder", master)
        script = Path(tmp) / "autograder" / "run_autograder"
        checked = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        text = os.fsdecode(script.read_bytes())
        command = text[text.index("/autograder/venv/bin/flashsim") :]
        assert shlex.split(command) == [
            "/autograder/venv/bin/flashsim", "grade", "--gradescope", "/autograder/results/results.json",
            "--hidden-visibility", "hidden", "--", name, "/autograder/submission",
        ]  # fmt: skip
