"""The trace: query rows per step, one-row values for big runs, and the versioned JSON round trip."""

import json

import numpy as np
import pytest

import sim
from sim.core.errors import InputError
from sim.machine.trace import VERSION, Trace


def inputs(n=8, nk=None, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((rows, d)).astype(np.float32) for rows in (n, nk or n, nk or n))


def traced(algorithm="flash2", n=8, nk=None, d=4, block=2, **options):
    q, k, v = inputs(n, nk, d)
    return sim.run(algorithm, q, k, v, block_rows=block, block_cols=block, record="values", **options), (q, k, v)


@pytest.mark.parametrize("algorithm", ["flash1", "flash2"])
def test_steps_know_their_query_rows(algorithm):
    result, _ = traced(algorithm, n=6, nk=5, block=4)  # ragged: the last Q block has 2 rows, the last K/V block 1
    for step in result.trace.steps:
        if step.i is None:
            assert step.rows is None and all(a.tensor in "KV" for a in step.reads)
        else:
            assert step.rows == (4 * step.i, min(4 * step.i + 4, 6))


def test_standard_softmax_steps_take_rows_from_the_tile_they_load():
    result, _ = traced("standard", n=8, block=2, sram_bytes=96)  # the softmax kernel holds 2 rows of S (4·(8+2) B each)
    softmax = [s for s in result.trace.steps if s.phase == "P = softmax(S)"]
    assert [s.rows for s in softmax if s.op == "load"] == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert all(s.rows == (2 * s.i, 2 * s.i + 2) for s in softmax)


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
def test_one_row_values_equal_that_row_of_the_full_values(algorithm):
    full, (q, k, v) = traced(algorithm, n=8, block=2, causal=True)
    one = sim.run(algorithm, q, k, v, block_rows=2, block_cols=2, causal=True, record="values", row=5).trace
    assert one.row == 5
    assert [s.values for s in one.steps] == [s.values for s in full.trace.only_row(5).steps]
    kept = [s for s in one.steps if s.values]
    assert kept and all(s.rows[0] <= 5 < s.rows[1] for s in kept)
    assert all(s.values is None for s in one.steps if s.rows is None or not s.rows[0] <= 5 < s.rows[1])


def test_one_row_values_are_the_rows_numbers():
    _, (q, k, v) = traced("flash2", n=8, block=2)
    result = sim.run("flash2", q, k, v, block_rows=2, block_cols=2, record="values", row=5)
    scale = 1 / np.sqrt(4)
    scores = [s.values["after"]["S_ij"] for s in result.trace.steps if s.line == 8 and s.values]
    assert len(scores) == 4  # one per K/V block
    for j, row in enumerate(scores):
        assert row == pytest.approx(scale * q[5] @ k[2 * j : 2 * j + 2].T, rel=1e-6)
    last_o = [s.values["after"]["O_i"] for s in result.trace.steps if s.line == 12 and s.values]
    assert last_o == [pytest.approx(result.output[5].tolist(), rel=1e-6)]
    assert all("K_j" not in s.values["after"] for s in result.trace.steps if s.values)


def test_row_outside_the_matrix_is_refused():
    q, k, v = inputs(4)
    with pytest.raises(InputError, match=r"row: 4 is outside the matrix; query rows are 0 … 3"):
        sim.run("flash2", q, k, v, record="values", row=4)


def test_only_row_refuses_a_trace_of_another_row():
    q, k, v = inputs(4)
    trace = sim.run("flash1", q, k, v, block_rows=2, block_cols=2, record="values", row=1).trace
    assert trace.only_row(1) is trace
    with pytest.raises(InputError, match="holds the values of row 1 only, not row 2"):
        trace.only_row(2)


def test_json_round_trip(tmp_path):
    result, _ = traced("flash1", n=4, block=2)
    path = tmp_path / "run.json"
    result.trace.save(path)
    loaded = Trace.load(path)
    assert loaded == result.trace
    assert loaded.steps[5].rows == (0, 2) and loaded.steps[5].sram[0].source.tensor == "K"
    assert json.loads(path.read_text())["version"] == VERSION


def _saved(tmp_path, edit) -> str:
    result, _ = traced("flash2", n=4, block=2)
    d = json.loads(json.dumps(result.trace.to_dict()))
    edit(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(version=VERSION + 1), f"version {VERSION + 1} is not supported"),
        (lambda d: d.update(schema="other"), "not a flashsim trace"),
        (lambda d: d.pop("config"), r"a field is missing \('config'\)"),
        (lambda d: d["config"].update(n="4"), "config n is '4', expected int"),
        (
            lambda d: d["config"].update(block_rows=0),
            "config block_rows is 0, expected an integer from 1 to 9,007,199,254,740,992",
        ),
        (lambda d: d["steps"][3].update(i="zero"), "step i is 'zero', expected int"),
        (lambda d: d["steps"][2]["reads"][0].update(r0=None), "access r0 is None, expected int"),
        (lambda d: d["steps"][3].update(bogus=1), "unexpected keyword argument 'bogus'"),
        (lambda d: d["steps"].pop(0), "step 0 is numbered 1"),
        (lambda d: d["steps"][2].update(values=[]), "malformed trace"),
        (lambda d: d["hbm"]["Q"].update(shape="4x4"), "hbm Q shape is '4x4', expected list"),
    ],
)
def test_malformed_traces_are_refused_on_one_line(tmp_path, edit, message):
    with pytest.raises(InputError, match=message) as e:
        Trace.load(_saved(tmp_path, edit))
    assert "\n" not in str(e.value)


def test_unreadable_files_are_refused(tmp_path):
    (tmp_path / "cut.json").write_text('{"schema": "flashsim.trace", "ver')
    with pytest.raises(InputError, match="is not valid JSON"):
        Trace.load(tmp_path / "cut.json")
    with pytest.raises(InputError, match="cannot read"):
        Trace.load(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="not a flashsim trace"):
        Trace.load(tmp_path / "list.json")


def test_a_trace_too_long_to_record_is_refused(monkeypatch):
    from sim.machine import memory

    monkeypatch.setattr(memory, "MAX_TRACE_STEPS", 30)
    q, k, v = inputs(8)
    assert len(sim.run("flash2", q, k, v, block_rows=4, block_cols=4, record="steps").trace.steps) == 28
    with pytest.raises(InputError, match="trace: the run has more than 30 steps, too many to record"):
        sim.run("flash2", q, k, v, block_rows=2, block_cols=2, record="steps")
    assert sim.run("flash2", q, k, v, block_rows=2, block_cols=2).hbm_bytes > 0  # counting alone records no steps
