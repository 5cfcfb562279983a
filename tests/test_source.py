"""Every recorded step names the listing line that ran it; `sim.machine.source.around` returns that line in context."""

import json
from pathlib import Path

import pytest

import sim
from sim.algorithms.registry import REGISTRY
from sim.api.inputs import random_inputs
from sim.machine import source
from sim.machine.trace import Trace

PACKAGE = Path(sim.__file__).parent


def _file_lines(file: str) -> list[str]:
    return (PACKAGE / file).read_text().splitlines()


def _steps_of(algorithm: str, backward: bool):
    q, k, v, do = random_inputs(1, 1, 12, 10, 4, "fp32", 0, grad=True)
    r = sim.run(algorithm, q, k, v, causal=True, block_rows=4, block_cols=4, record="steps", dropout_p=0.0)
    if backward:
        return sim.backward(r, do, block_rows=4, block_cols=4, record="steps").trace.steps
    return r.trace.steps


@pytest.mark.parametrize(
    "algorithm, backward",
    [(name, backward) for name, a in REGISTRY.items() for backward in (False, True) if not backward or a.backward],
)
def test_every_step_names_a_chip_step_call_in_its_own_listing(algorithm, backward):
    listing = REGISTRY[algorithm].backward if backward else REGISTRY[algorithm].forward
    want_file = Path(listing.__code__.co_filename).relative_to(PACKAGE).as_posix()
    first, last = listing.__code__.co_firstlineno, max(line for *_, line in listing.__code__.co_lines() if line)
    lines = _file_lines(want_file)
    steps = _steps_of(algorithm, backward)
    assert steps
    for step in steps:
        file, n = step.code
        assert file == want_file
        assert first <= n <= last, f"step {step.index} at line {n}, outside {listing.__name__} ({first}–{last})"
        assert "chip.step(" in lines[n - 1], f"step {step.index}: line {n} is {lines[n - 1]!r}"


def test_decode_steps_name_the_flash_decoding_listing():
    q, k, v = random_inputs(1, 1, 2, 40, 4, "fp32", 0)
    steps = sim.decode(q, k, v, splits=3, record="steps").trace.steps
    assert {s.code[0] for s in steps} == {"algorithms/flash_decoding.py"}
    lines = _file_lines("algorithms/flash_decoding.py")
    assert all("chip.step(" in lines[s.code[1] - 1] for s in steps)


def test_around_marks_the_step_line_and_shows_its_block():
    step = next(s for s in _steps_of("flash2", False) if s.line == 9)  # the online softmax update, a long call
    got = source.around(step, before=2)
    current = [line for line in got if line.current]
    assert len(current) == 1 and current[0].number == step.code[1] and "with chip.step(" in current[0].text
    lines = _file_lines("algorithms/flash2.py")
    assert [line.text for line in got] == lines[got[0].number - 1 : got[-1].number]
    assert got[0].number == step.code[1] - 2
    body = "\n".join(line.text for line in got if line.number > step.code[1])
    assert "extend(S_ij" in body and "m_i = chip.put" in body  # the whole with block, past the call's own lines
    assert "line 10" not in body and "O_i ← diag" not in body  # and not the next step


def test_around_is_empty_for_a_step_without_code():
    step = _steps_of("flash1", False)[0]
    assert source.around(step) != []
    step.code = None
    assert source.around(step) == []


def test_code_survives_the_json_round_trip_and_version_1_traces_still_load(tmp_path):
    q, k, v = random_inputs(1, 1, 8, 8, 4, "fp32", 0)
    trace = sim.run("flash1", q, k, v, block_rows=4, block_cols=4, record="values").trace
    path = tmp_path / "t.json"
    trace.save(path)
    again = Trace.load(path)
    assert [s.code for s in again.steps] == [s.code for s in trace.steps] and all(s.code for s in again.steps)
    old = json.loads(path.read_text())
    old["version"] = 1
    for s in old["steps"]:
        del s["code"]
    loaded = Trace.from_dict(old)
    assert all(s.code is None for s in loaded.steps) and [s.line for s in loaded.steps] == [s.line for s in trace.steps]
    assert [s.values for s in loaded.steps] == [s.values for s in trace.steps]


def test_a_listing_outside_the_package_is_named_by_its_own_path():
    assert source.relative(str(PACKAGE / "algorithms" / "flash2.py")) == "algorithms/flash2.py"
    assert source.relative("/elsewhere/my_listing.py") == "/elsewhere/my_listing.py"
