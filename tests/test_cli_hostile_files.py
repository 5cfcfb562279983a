"""Review h2's hostile files: a grading journal, a trace to --load, a --json pipe, an empty folder name. Each gets one
line naming what is wrong (exit code 2), never a traceback, a hang or a silently wrong answer."""

import copy
import json
import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import sim
from sim.cli import app
from sim.core.errors import InputError
from sim.grading import journal
from sim.grading.report import SubmissionReport
from sim.grading.report import TestResult as Result
from sim.viewer import traces
from sim.viz import listing, screen, timeline
from tests.cli_runner import error_line

TINY = Path(__file__).parent / "grading_submissions" / "tiny" / "01_tiny_softmax.py"
ASSIGNMENT = "01_tiny_softmax"
HEAD = {"assignment": ASSIGNMENT, "master_sha256": "0" * 64, "grader_sha256": "1" * 64, "tests": ["t"],
        "limits": {"wall_s": 10.0}, "ran": True, "seed": 3}  # fmt: skip
RUN = {k: v for k, v in HEAD.items() if k != "seed"}  # the run that wrote it
REPORT = json.loads(
    json.dumps(
        SubmissionReport(
            "alice.py", ASSIGNMENT, 3, tests=[Result("t", "public", 1.0, 2.0, "partial", "half")]
        ).__dict__,
        default=vars,
    )
)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=6)  # fmt: skip


@contextmanager
def within(seconds: int):
    """Fail instead of hanging: SIGALRM after `seconds`."""

    def stop(*_):
        raise TimeoutError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def invoke(*args):
    with within(30):
        return CliRunner().invoke(app, [str(a) for a in args])


def write_journal(path: Path, *lines) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


# -- 1. the grading journal ---------------------------------------------------------------------------------------


def test_a_journal_that_is_a_pipe_or_a_device_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, kind in ((tmp_path / "fifo", "a pipe"), ("/dev/null", "a character device"), (tmp_path, "a folder")):
        with within(10), pytest.raises(InputError, match=f"--journal: .* is {kind}, not a regular file"):
            journal.resume(path, RUN, None)
        line = error_line(invoke("grade", "01", tmp_path, "--journal", path))
        assert "--journal" in line and (kind in line or "directory" in line), line


def head(**change) -> str:
    return json.dumps(HEAD | change).replace("Infinity", "1e400")


@pytest.mark.parametrize("text, field", [
    ("[1]", "line 1"), ("5", "line 1"), ('{"assignment": "01_tiny_softmax"}', "line 1"),
    (head(seed="abc"), "line 1: seed"), (head(seed=-7), "line 1: seed"), (head(seed=float("inf")), "line 1: seed"),
    (head(seed=2**64), "line 1: seed"), ("", "empty"), (head(master_sha256="ab"), "line 1: master_sha256"),
    (head(grader_sha256="G" * 64), "line 1: grader_sha256"), (head(grader_sha256=None), "line 1: grader_sha256"),
    (head(tests="t"), "line 1: tests"), (head(tests=[5]), "line 1: tests"), (head(limits=[]), "line 1: limits"),
    (head(limits={"wall_s": -1}), "line 1: limits: wall_s"), (head(ran=1), "line 1: ran"),
    ('{"assignment": "01_tiny_softmax", "seed": 3}', "line 1 records only the assignment and seed"),
    (json.dumps({k: v for k, v in HEAD.items() if k != "grader_sha256"}), "line 1 does not record the grader's code"),
])  # fmt: skip
def test_a_journal_whose_first_line_is_malformed_is_refused_naming_it(tmp_path, text, field):
    path = write_journal(tmp_path / "j.jsonl", text)
    with pytest.raises(InputError, match=f"--journal: .* is not a grading journal .*{field}"):
        journal.resume(path, RUN, None)
    assert "--journal:" in error_line(invoke("grade", TINY, TINY, "--journal", path))


@pytest.mark.parametrize("change, field", [
    ({"seed": 4}, "seed"), ({"assignment": "02"}, "assignment"), ({"seconds": float("nan")}, "seconds"),
    ({"submission": 5}, "submission"), ({"submission": "a/b.py"}, "submission"), ({"flags": "x"}, "flags"),
    ({"tests": [{"name": "t"}]}, "test 0: no visibility"), ({"extra": 1}, "extra"),
    ({"tests": [dict(REPORT["tests"][0], points=3.0)]}, "points"),
    ({"tests": [dict(REPORT["tests"][0], status="won")]}, "status"),
    ({"tests": [dict(REPORT["tests"][0], hbm_bytes=-1)]}, "hbm_bytes"),
])  # fmt: skip
def test_a_report_line_out_of_range_is_refused_naming_its_field(tmp_path, change, field):
    path = write_journal(tmp_path / "j.jsonl", HEAD, REPORT | change)
    with pytest.raises(InputError, match=f"not a grading journal .*line 2.*{field}"):
        journal.resume(path, RUN, None)


def test_a_journal_the_grader_wrote_resumes_as_it_was(tmp_path):
    path = write_journal(tmp_path / "j.jsonl", HEAD, REPORT)
    done, seed = journal.resume(path, RUN, None)
    assert seed == 3 and done["alice.py"].tests[0].points == 1.0 and done["alice.py"].score == 1.0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(["head", "report", "test"]), key=st.text(max_size=12), value=JSON, data=st.data())
def test_any_value_in_any_field_of_a_journal_is_taken_only_if_of_its_type(tmp_path, where, key, value, data):
    head, report = copy.deepcopy(HEAD), copy.deepcopy(REPORT)
    target = {"head": head, "report": report, "test": report["tests"][0]}[where]
    key = data.draw(st.sampled_from([*target, key]))
    target[key] = value
    path = write_journal(tmp_path / "j.jsonl", head, report)
    try:
        done, seed = journal.resume(path, RUN, None)
    except InputError as e:
        assert str(e).startswith("--journal: ") and "\n" not in str(e)
        return
    r = done[report["submission"]]  # taken: every field as the grader writes it
    assert isinstance(seed, int) and 0 <= seed < 2**64 and r.seed == seed and r.assignment == ASSIGNMENT
    assert all(isinstance(t.name, str) and 0 <= t.points <= t.max_points for t in r.tests)


# -- 2., 3. empty names, traces that --load refuses ------------------------------------------------------------------


def test_lessons_copy_refuses_an_empty_folder_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "empty folder name" in error_line(invoke("lessons", "copy", ""))
    assert list(tmp_path.iterdir()) == []


def test_trace_load_refuses_an_empty_name_a_pipe_and_a_device(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert error_line(invoke("trace", "--load", "")) == "error: --load: an empty file name"
    assert error_line(invoke("trace", "--load", tmp_path / "fifo")).endswith("is a pipe, not a regular file")
    assert error_line(invoke("trace", "--load", "/dev/null")).endswith("is a character device, not a regular file")


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("trace") / "t.json"
    assert invoke("trace", "--n", 4, "--d", 2, "--json", path).exit_code == 0
    return json.loads(path.read_text())


def set_at(d: dict, where: tuple, value) -> dict:
    d = copy.deepcopy(d)
    inner = d
    for key in where[:-1]:
        inner = inner[key]
    inner[where[-1]] = value
    return d


@pytest.mark.parametrize("where, value, said", [
    (("hbm",), "abc", "hbm is 'abc', not an object"), (("hbm", "Q"), "abc", "hbm Q is 'abc'"),
    (("steps",), "abc", "steps is 'abc', not a list"), (("steps", 0), 5, "step 0 is 5, not an object"),
    (("steps", 0, "sram", 0), 5, "step 0 sram is 5"), (("config",), [[1, 2]], "config is [[1, 2]]"),
    (("config", "scale"), "NaN", "config scale is 'NaN', not a finite number"),
    (("output",), [[1.0], [1.0, 2.0]], "output is ragged"),
    (("output",), [[1.0, [2.0]]], "output holds [2.0] where a number goes"),
    (("algorithm",), "nope", "algorithm 'nope' is not one flashsim simulates"),
    (("config", "causal"), "yes", "config causal is 'yes'"), (("steps", 0, "op"), "fly", "step 0 op is 'fly'"),
    (("steps", 0, "reads", 0, "tensor"), "ZZ", "moves 'ZZ', a tensor not in hbm"),
    (("steps", 0, "reads", 0, "r1"), 99, "outside its [4, 2]"),
    (("config", "query_heads"), [2, 0], "config query_heads is [2, 0], not [first, last]"),
    (("config", "query_heads"), [0, 1], "hbm Q has [4] rows, the config 8"),
    (("config", "query_heads"), [-1, -1], "config query_heads is [-1, -1], not [first, last] of a packed group"),
    # red team 87: an IndexError, an OverflowError, a bar of 10⁹ characters
    (("config", "window"), [1], "config window is [1], not [left, right]"),
    (("output", 0, 0), 10**400, "output holds a number past float64's range"),
    (("steps", 1, "sram_bytes"), 10**9, "step 1 holds 1,000,000,000 bytes of SRAM, more than config sram_bytes"),
    # red team 92: '[/]' was rich markup (a traceback; a javascript: link in --html), escapes reached the terminal
    (("steps", 0, "phase"), "[/]", "holds the text '[/]': brackets and control characters are not a trace's"),
    (("steps", 0, "text"), "\x1b]0;pwned\x07", "holds the text '\\x1b]0;pwned\\x07': brackets and control"),
    # red team 99: an OverflowError traceback; a closed form of -33,280 B ("moved so far: -142%"), of 0.5 B
    (("config", "scale"), 10**400, "config scale holds a number past float64's range"),
    (("config", "softcap"), 10**400, "config softcap holds a number past float64's range"),
    (("config", "closed_form"), dict(hbm_read_bytes=-33280, hbm_write_bytes=0, flops=0, exps=0, elementwise=0),
     "config closed_form hbm_read_bytes is -33280, not a whole number from 0 to"),
    (("config", "closed_form"), dict(hbm_read_bytes=0.5, hbm_write_bytes=0, flops=0, exps=0, elementwise=0),
     "config closed_form hbm_read_bytes is 0.5, not a whole number"),
    (("config", "closed_form"), dict(hbm_read_bytes=10**400, hbm_write_bytes=0, flops=0, exps=0, elementwise=0),
     "config closed_form hbm_read_bytes is"),
])  # fmt: skip
def test_trace_load_names_the_field_that_is_wrong(tmp_path, saved, where, value, said):
    (tmp_path / "bad.json").write_text(json.dumps(set_at(saved, where, value)))
    line = error_line(invoke("trace", "--load", tmp_path / "bad.json"))
    assert line.startswith("error: --load: malformed trace: ") and said in line, line


def test_a_trace_shows_code_only_from_the_package_s_own_listings(tmp_path, saved):
    """Red team 87: a step's code ["/dev/zero", 3] read until memory ran out, ["/dev/stdin", 1] hung, and
    ["../../../../../etc/passwd", 1] was shown and written into the --html export."""
    for k, file in enumerate(("/dev/zero", "/dev/stdin", "../" * 12 + "etc/passwd", "/etc/hostname", "__init__.py")):
        (tmp_path / "t.json").write_text(json.dumps(set_at(saved, ("steps", 1, "code"), [file, 1])))
        with within(20):
            shown = invoke("trace", "--load", tmp_path / "t.json", "--step", 1, "--html", tmp_path / f"{k}.html")
        assert shown.exit_code == 0, shown.output
        html = (tmp_path / f"{k}.html").read_text()
        assert "root:" not in html and "__init__.py:1" not in shown.output and f"{file}:1" not in shown.output
    (tmp_path / "t.json").write_text(json.dumps(saved))  # the package's own listing is shown
    assert "algorithms/flash2.py:" in invoke("trace", "--load", tmp_path / "t.json", "--step", 1).output


def test_a_trace_whose_closed_form_is_zero_shows_without_a_ratio(tmp_path, saved):
    zero = dict.fromkeys(("hbm_read_bytes", "hbm_write_bytes", "flops", "exps", "elementwise"), 0)
    (tmp_path / "t.json").write_text(json.dumps(set_at(saved, ("config", "closed_form"), zero)))
    shown = invoke("trace", "--load", tmp_path / "t.json", "--step", 1)  # ZeroDivisionError (red team 87)
    assert shown.exit_code == 0 and "—" in shown.output, shown.output


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON, data=st.data())
def test_any_value_anywhere_in_a_trace_loads_and_shows_or_is_refused_in_one_line(tmp_path, saved, value, data):
    where, inner = (), saved
    while isinstance(inner, dict | list) and inner and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(list(inner) if isinstance(inner, dict) else range(len(inner))))
        where, inner = (*where, key), inner[key]
    (tmp_path / "t.json").write_text(json.dumps(set_at(saved, where, value) if where else value))
    try:
        view = timeline.Timeline(traces.load(tmp_path / "t.json"))
        with open(os.devnull, "w") as devnull:  # what `trace --load` prints, piped and with --step
            for shown in (listing.listing(view), screen.screen(view, len(view) - 1)):
                Console(file=devnull, width=120).print(shown)
    except InputError as e:
        assert "\n" not in str(e)


# -- 4. a --json pipe nobody reads ---------------------------------------------------------------------------------


def test_run_json_to_a_pipe_without_a_reader_is_refused_before_the_run_and_with_one_it_is_written(
    tmp_path, monkeypatch
):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with monkeypatch.context() as m:  # refused before the work: the run would fail the test
        m.setattr(sim, "run", lambda *a, **k: pytest.fail("the run started before --json's pipe was checked"))
        line = error_line(invoke("run", "--n", 64, "--json", fifo))
    assert line.startswith("error: flashsim run: Invalid value for '--json'") and line.endswith("no reader on the pipe")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, there before the command opens the pipe
    try:
        result = invoke("run", "--n", 64, "--json", fifo)
        assert result.exit_code == 0, result.output
        assert json.loads(os.read(reader, 1 << 20))["n"] == 64  # the JSON fits the pipe's buffer
    finally:
        os.close(reader)


def reading(fifo: Path) -> dict:
    """A reader of `fifo` on a thread, which blocks until a writer opens it and reads to the end of its input."""
    got: dict = {}

    def read():
        with open(fifo, "rb") as f:
            got["bytes"] = f.read()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    got["thread"] = thread
    return got


def test_one_pipe_named_by_two_options_gets_both_outputs(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = reading(fifo)
    result = invoke("trace", "--n", 4, "--d", 2, "--json", fifo, "--svg", fifo)  # the trace, then the listing
    got["thread"].join(10)
    assert result.exit_code == 0, result.output
    text = got["bytes"].decode()
    trace, svg = text[: text.index("<svg")], text[text.index("<svg") :]
    assert json.loads(trace)["config"]["n"] == 4 and svg.rstrip().endswith("</svg>")


def test_a_pipe_whose_reader_leaves_before_the_write_is_said_in_one_line(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there when --json opens the pipe, gone before the write
    run = sim.run
    monkeypatch.setattr(sim, "run", lambda *a, **k: (os.close(reader), run(*a, **k))[1])
    line = error_line(invoke("run", "--n", 64, "--json", fifo))  # click took EPIPE for stdout's: exit 1, silent
    assert line == f"error: {fifo}: the pipe's reader left before the output was written whole"


def test_sweep_plot_to_a_pipe_is_drawn_whole(tmp_path):
    pytest.importorskip("matplotlib")
    fifo = tmp_path / "plot.png"
    os.mkfifo(fifo)
    got = reading(fifo)
    result = invoke("sweep", "--n", 512, "--plot", fifo, "--csv")  # PNG's writer seeks, which a pipe cannot
    got["thread"].join(10)
    assert result.exit_code == 0, result.output
    assert got["bytes"].startswith(b"\x89PNG\r\n\x1a\n") and got["bytes"].endswith(b"IEND\xaeB`\x82")


def test_a_variant_trace_without_its_own_closed_form_is_counted_from_its_config(tmp_path):
    """Red team 99: a window's trace with its closed form deleted fell back to a plain head's ('moved so far: 375%');
    a softcap of 3 (an int) was dropped from the header."""
    path = tmp_path / "t.json"
    assert invoke("trace", "--n", 16, "--d", 4, "--block-rows", 4, "--block-cols", 4, "--window", "2,0",
                  "--json", path).exit_code == 0  # fmt: skip
    trace = json.loads(path.read_text())
    trace["config"].pop("closed_form", None)
    trace["config"]["softcap"] = 3
    path.write_text(json.dumps(trace))
    shown = invoke("trace", "--load", path, "--step", len(trace["steps"]) - 1, "--width", 200)
    said = " ".join(shown.output.split())  # Q 256 B + 7 K and 7 V blocks of 64 B; O 256 B + L 64 B: by hand
    assert "closed form 1,152 B 320 B" in said and "softcap=3" in said, shown.output
