"""sim.machine.warpgroups: the critical path of warpgroups taking turns on one tensor pipe, worked by hand."""

import pytest

from sim.machine.warpgroups import Latencies, Op, run, step_seconds

TURN, ISSUE, WAIT = Op("turn_wait"), Op("issue", "g"), Op("wait")


def work(seconds: float) -> Op:
    return Op("work", work=seconds)


def ping_pong(occupancy: float, latency: float, busy: float) -> tuple[tuple, tuple, Latencies]:
    """Two warpgroups, each step: wait for the turn, issue one group, pass the turn, wait for the group, work."""
    step = (TURN, ISSUE, Op("turn_pass"), WAIT, work(busy))
    return ((), (Op("turn_pass"),)), (step, step), Latencies((("g", occupancy, latency),))


def test_latency_bound_ping_pong():
    # group: 100 on the pipe, done 150 after it starts; 300 of work. Warpgroup 0 issues at 0 (pipe 0–100, done
    # 150), works until 450; warpgroup 1 has the turn at 0, its group waits for the pipe (100–200, done 250), works
    # until 550. Step 2: warpgroup 0 at 450 (the turn came at 0), pipe 450–550, done 600, works until 900;
    # warpgroup 1 at 550, pipe 550–650, done 700, until 1000. Each step 150 + 300: the pipe idles
    first, step, lat = ping_pong(100, 150, 300)
    assert run(first, step, 1, lat) == pytest.approx(550)
    assert run(first, step, 2, lat) == pytest.approx(1000)
    assert step_seconds(first, step, lat) == pytest.approx(450)


def test_pipe_bound_ping_pong():
    # group: 300 on the pipe, done 350 after it starts; 100 of work. Warpgroup 0: pipe 0–300, done 350, works until
    # 450; warpgroup 1: pipe 300–600, done 650, until 750; warpgroup 0 again at 450: pipe 600–900, done 950, until
    # 1050; warpgroup 1 at 750: pipe 900–1200, until 1350. The pipe never idles: a step is two groups, 600
    first, step, lat = ping_pong(300, 350, 100)
    assert run(first, step, 2, lat) == pytest.approx(1350)
    assert step_seconds(first, step, lat) == pytest.approx(600)


def test_a_turn_is_passed_after_a_hand_off():
    # as the latency-bound case with 50 per hand-off: warpgroup 0 waits for the first pass (at 0) until 50, its group
    # runs 50–150 (done 200), work until 500; warpgroup 1 gets the turn at 50 + 50 = 100, its group waits for the
    # pipe (150–250, done 300), work until 600. Warpgroup 0's next turn was passed at 100 (ready at 150): it goes on
    # at 500. The hand-offs hide behind the work: still 450 a step
    first, step, lat = ping_pong(100, 150, 300)
    lat = Latencies(lat.groups, turn=50)
    assert run(first, step, 1, lat) == pytest.approx(600)
    assert step_seconds(first, step, lat) == pytest.approx(450)


def test_the_stages_bound_a_step_when_copies_are_slow():
    # one warpgroup, 2 stages, a copy 500 after the stage was handed back; each step: wait for the stage, a group
    # (100, done when it ends), hand the stage back, 100 of work. Steps 0 and 1 wait for the first copies (500):
    # step 0 hands back at 600, ends 700; step 1 600–800 (hands back 800), ends 900; step 2 waits for step 0's
    # stage again, 600 + 500 = 1100, hands back 1200, ends 1300; step 3 at 800 + 500 = 1300, ends 1500; step 4 at
    # 1700. Two steps per copy and use: (500 + 100) / 2 = 300 a step
    step = ((Op("full"), ISSUE, WAIT, Op("empty"), work(100)),)
    lat = Latencies((("g", 100, 100),), copy=500, stages=2)
    assert run(((),), step, 3, lat) == pytest.approx(1300)
    assert run(((),), step, 4, lat) == pytest.approx(1500)
    assert step_seconds(((),), step, lat) == pytest.approx(300)


def test_a_reduce_add_must_have_read_its_tile_before_the_next():
    # one warpgroup: wait for the last reduce-add's read, a group (100), 100 of work, a reduce-add read 500 later.
    # Step 0 ends 200 (read at 700); step 1 waits until 700, ends 900 (read at 1400): 700 a step
    step = ((Op("reduce_wait"), ISSUE, WAIT, work(100), Op("reduce")),)
    lat = Latencies((("g", 100, 100),), reduce=500)
    assert run(((),), step, 2, lat) == pytest.approx(900)
    assert step_seconds(((),), step, lat) == pytest.approx(700)


def test_wait_leaves_the_newest_groups_in_flight():
    # one warpgroup issues two groups (each 100 on the pipe, done 250 after it starts: at 250 and 350), waits with
    # one in flight (until 250), works 50 (until 300), waits for the rest (350): 350 a step, the pipe's second group
    # overlapping the first wait. The next step's first group starts at 350
    step = ((ISSUE, ISSUE, Op("wait", pending=1), work(50), WAIT),)
    lat = Latencies((("g", 100, 250),))
    assert run(((),), step, 1, lat) == pytest.approx(350)
    assert step_seconds(((),), step, lat) == pytest.approx(350)


def test_a_turn_never_passed_is_refused():
    step = (TURN, ISSUE, WAIT)
    with pytest.raises(ValueError, match="waits on another"):
        run(((), ()), (step, step), 1, Latencies((("g", 1, 1),)))


def asks(**units: float) -> Op:
    """A Work with these demands (seconds each unit alone), no own seconds."""
    return Op("work", demand=tuple(units.items()))


def two(a: tuple, b: tuple) -> float:
    """Both warpgroups' end, each running its own ops once, no turns."""
    return run(((), ()), (a, b), 1, Latencies(()))


def test_two_works_on_one_unit_share_it():
    # 100 of MUFU each, both from 0: each gets half of it, both end at 200 (alone: 100)
    assert two((asks(MUFU=100),), (asks(MUFU=100),)) == pytest.approx(200)
    assert run(((),), ((asks(MUFU=100),),), 1, Latencies(())) == pytest.approx(100)


def test_a_work_that_starts_later_shares_only_the_overlap():
    # warpgroup 0: 100 of MUFU from 0; warpgroup 1: 50 of its own (no unit), then 100 of MUFU. 0–50: warpgroup 0
    # alone (50 served, 50 left); from 50 both at half: warpgroup 0's 50 take 100 (ends 150), warpgroup 1 has 50
    # served by then and its other 50 alone: ends 200. Warpgroup 0 alone ends at 150, not 100
    assert two((asks(MUFU=100),), (Op("work", work=50), asks(MUFU=100))) == pytest.approx(200)
    # warpgroup 0 then 1000 of its own: it ends 150 + 1000, after warpgroup 1's 200
    assert two((asks(MUFU=100), Op("work", work=1000)), (Op("work", work=50), asks(MUFU=100))) == pytest.approx(1150)


def test_works_on_different_units_do_not_slow_each_other():
    assert two((asks(MUFU=100),), (asks(issue=100),)) == pytest.approx(100)


def test_a_work_ends_when_every_demand_is_met_then_its_own_seconds():
    # warpgroup 0: 100 of MUFU and 60 of issue slots, then 30 of its own; warpgroup 1: 60 of issue slots. The issue
    # slots are shared 0–120 (60 each at half): both issue demands met at 120; warpgroup 0's MUFU (alone) at 100.
    # Warpgroup 0's demands are met at 120, it ends at 150; warpgroup 1 at 120
    a = (Op("work", demand=(("MUFU", 100), ("issue", 60)), work=30),)
    assert two(a, (asks(issue=60),)) == pytest.approx(150)
    assert run(((),), (a,), 1, Latencies(())) == pytest.approx(130)  # alone: max(100, 60) + 30
