"""Warpgroups that take turns on one SM: the critical path of a kernel's step (backward rung 7).

A thread block's compute warpgroups each run a program, the same list of operations per step (one Q block):
  Issue(group)   hand a wgmma commit group to the SM's tensor pipe and go on (wgmma.mma_async is asynchronous);
  Wait(pending)  wgmma.wait_group: until all but the last `pending` groups it issued have completed;
  Work(demand, seconds)  its own warps' work between two waits (exponentials, elementwise, loads and stores to
                 SRAM, the instructions that do them), on units it shares with the other warpgroups, then its own
                 seconds;
  TurnWait, TurnPass  the turns (named barriers): a warpgroup waits until the other has passed it the turn;
  Full, Empty    the producer's stages: wait until this step's stage has arrived / hand it back;
  Reduce, ReduceWait  a TMA reduce-add out of its SRAM tile / the wait until the TMA has read that tile.
Assumptions (each a number measured once per GPU, `python -m gpu.lab.calibrate`'s "latencies", or a rate):
  - the tensor pipe runs groups one at a time in the order they were issued (both warpgroups' wgmma go to the same
    four tensor cores); a group holds it for its occupancy and completes its latency after it started (one group
    alone: latency ≥ occupancy, the difference is the pipe's depth and the wait's return);
  - a warpgroup's Work asks the SM's units for their time (`Op.demand`: its exponentials on the MUFU, its other
    elementwise work on the FMA pipes, its loads and stores on SRAM, each at the unit's rate, and its warps'
    instructions on the schedulers' issue slots, one a clock: `ISSUE_PER_CLOCK`, each of its four warps on its own
    scheduler); the warpgroups' Works that run at the same time share each unit evenly (the warps of both
    warpgroups sit on the same four schedulers and reach the same MUFU, FMA pipes and SRAM: two Works on the MUFU
    at once each get half of it), a unit one of them no longer needs goes whole to the other, and a Work ends when
    each of its demands is met, then its own seconds (`Op.work`: each branch its warps take at
    `Hardware.branch_clocks`, the wait in a fence after its stores at `Hardware.fence_clocks`, both measured in
    the kernel's own instruction streams) later;
  - a hand-off of the turn costs `turn` seconds after the pass; a stage arrives `copy` seconds after the second
    warpgroup has handed back the stage it reuses (`stages` steps before, the producer waiting on that); a reduce-add
    has read its tile `reduce` seconds after it was issued.
The step is the steady state: (time of 2m steps − time of m steps) / m. Every latency is what one measurement gave
with every SM busy at once, not a distribution: the step is a critical path, not an average over stalls.
"""

from dataclasses import dataclass

from sim.machine.launch import Phase

EPSILON = 1e-15  # seconds: a demand left this small is met (a millionth of a clock)
NOTHING = Phase("nothing")  # no share of the units' work (turns, waits, the producer's handshakes)
ISSUE_PER_CLOCK = 1  # instructions a warp scheduler issues per clock (Hopper: four per SM, one warp each a clock)


@dataclass(frozen=True)
class Op:
    """One operation of a warpgroup's step: `kind` one of KINDS; `group` names a wgmma commit group (Issue, as
    `python -m gpu.lab.calibrate` names it), `pending` the groups left in flight (Wait); `phase` the share of a tile
    pair's work it does (Issue: its matmul FLOPs and wgmma's SRAM reads; Work: exponentials, elementwise, SRAM),
    `instructions` the instructions each of its warps issues in it and `branches` the branches each takes (Work:
    counted from the kernel's SASS, 0: not counted), `fence` the stores to SRAM it fences at its end (as
    `python -m gpu.lab.calibrate` names them: "dS_ij", "τ dQ_i"; "": none); once a machine's rates are known
    (`sim.machine.timing`), `demand` the seconds it keeps each unit it shares with the other warpgroups' Works busy
    (its warps' issue slots, MUFU, FMA, SRAM: each alone) and `work` its own seconds after them (taken branches, a
    fence's wait)."""

    kind: str
    group: str = ""
    pending: int = 0
    phase: Phase = NOTHING
    instructions: int = 0
    branches: int = 0
    fence: str = ""
    demand: tuple[tuple[str, float], ...] = ()
    work: float = 0.0


@dataclass(frozen=True)
class Program:
    """Each warpgroup's operations before its loop (`first`) and in each step (`step`), one tuple per warpgroup."""

    first: tuple[tuple[Op, ...], ...]
    step: tuple[tuple[Op, ...], ...]
    stage: str = ""  # the producer's stage, as `python -m gpu.lab.calibrate` names its copy ("d64 br128")

    def phases(self) -> tuple[Phase, ...]:
        """Every operation's share of a tile pair's work, all warpgroups."""
        return tuple(op.phase for ops in self.step for op in ops)


KINDS = ("issue", "wait", "work", "turn_wait", "turn_pass", "full", "empty", "reduce", "reduce_wait")


@dataclass(frozen=True)
class Latencies:
    """Seconds: each wgmma group's (occupancy of the tensor pipe, latency from its start to its completion), a turn's
    hand-off, a stage's copy, a reduce-add's read of its tile."""

    groups: tuple[tuple[str, float, float], ...]
    turn: float = 0.0
    copy: float = 0.0
    reduce: float = 0.0
    stages: int = 2


def run(first: tuple[tuple[Op, ...], ...], step: tuple[tuple[Op, ...], ...], steps: int, lat: Latencies) -> float:
    """Seconds until every warpgroup has run `first` (its operations before the loop) and `steps` times `step`."""
    groups = {name: (occupancy, latency) for name, occupancy, latency in lat.groups}
    programs = [list(f) + list(s) * steps for f, s in zip(first, step, strict=True)]
    wgs = range(len(programs))
    t, pc = [0.0 for _ in wgs], [0 for _ in wgs]
    in_flight: list[list[float]] = [[] for _ in wgs]  # completion times of each warpgroup's groups, issue order
    passes: list[list[float]] = [[] for _ in wgs]  # when each turn was passed to the warpgroup
    turns, fulls = [0 for _ in wgs], [0 for _ in wgs]
    handed: dict[int, list[float]] = {}  # stage use k → when each warpgroup handed it back
    read = [0.0 for _ in wgs]  # when each warpgroup's last reduce-add has read its tile
    pipe = 0.0  # when the tensor pipe is free
    working: dict[int, dict[str, float]] = {}  # warpgroup in a Work → what is left of its demand on each unit
    then: dict[int, float] = {}  # …and its Work's own seconds, once its demands are met
    now = 0.0

    def ready(c: int) -> float | None:
        """When warpgroup c's next operation can start (None: it waits on the other warpgroup)."""
        op = programs[c][pc[c]]
        if op.kind == "turn_wait":
            return None if len(passes[c]) <= turns[c] else max(t[c], passes[c][turns[c]] + lat.turn)
        if op.kind == "full":
            k = fulls[c] - lat.stages
            if k < 0:
                return max(t[c], lat.copy)
            back = handed.get(k, [])
            return None if len(back) < len(programs) else max(t[c], max(back) + lat.copy)
        if op.kind == "reduce_wait":
            return max(t[c], read[c])
        return t[c]

    def sharing() -> dict[str, int]:
        """How many Works use each unit now."""
        users: dict[str, int] = {}
        for left in working.values():
            for unit, s in left.items():
                users[unit] = users.get(unit, 0) + (s > 0)
        return users

    def advance(to: float) -> None:
        """Every Work's demands served from now to `to`, each unit split evenly among the Works that use it."""
        users = sharing()
        for left in working.values():
            for unit, s in left.items():
                if s > 0:
                    left[unit] = s - (to - now) / users[unit] if s - (to - now) / users[unit] > EPSILON else 0.0

    while any(pc[c] < len(programs[c]) for c in wgs) or working:
        starts = [(s, c) for c in wgs if c not in working and pc[c] < len(programs[c]) and (s := ready(c)) is not None]
        first_start = min(starts, default=(float("inf"), -1))
        users = sharing()
        served = min((now + s * users[u] for left in working.values() for u, s in left.items() if s > 0),
                     default=float("inf"))  # fmt: skip
        if served <= first_start[0] and served < float("inf"):  # a demand is met first: the shares change
            advance(served)
            now = served
            for c in [c for c, left in working.items() if not any(left.values())]:
                t[c] = now + then.pop(c)  # its demands met, then its own seconds
                del working[c]
            continue
        if not starts:
            raise ValueError("warpgroups: every warpgroup waits on another (a turn passed too few times)")
        start, c = max(first_start[0], now), first_start[1]
        advance(start)
        now = start
        op = programs[c][pc[c]]
        pc[c] += 1
        t[c] = start
        if op.kind == "turn_wait":
            turns[c] += 1
        elif op.kind == "turn_pass":
            passes[(c + 1) % len(programs)].append(t[c])
        elif op.kind == "full":
            fulls[c] += 1
        elif op.kind == "empty":
            handed.setdefault(fulls[c] - 1, []).append(t[c])
        elif op.kind == "issue":
            occupancy, latency = groups[op.group]
            begin = max(t[c], pipe)
            pipe = begin + occupancy
            in_flight[c].append(begin + max(occupancy, latency))
        elif op.kind == "wait":
            done_at = in_flight[c][: max(0, len(in_flight[c]) - op.pending)]
            t[c] = max([t[c], *done_at])
            in_flight[c] = in_flight[c][len(done_at) :]
        elif op.kind == "work":
            if any(s > 0 for _, s in op.demand):
                working[c], then[c] = {u: s for u, s in op.demand if s > 0}, op.work
            else:
                t[c] += op.work
        elif op.kind == "reduce":
            read[c] = t[c] + lat.reduce
        elif op.kind != "reduce_wait":
            raise ValueError(f"warpgroups: unknown operation {op.kind!r}")
    return max(t)


def step_seconds(first: tuple[tuple[Op, ...], ...], step: tuple[tuple[Op, ...], ...], lat: Latencies,
                 m: int = 8) -> float:  # fmt: skip
    """The steady state's seconds per step: (run of 2m steps − run of m steps) / m."""
    return (run(first, step, 2 * m, lat) - run(first, step, m, lat)) / m
