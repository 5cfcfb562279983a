"""A kernel's time: every resource it uses, the waves its thread blocks run in, and which resource bounds it.

Each thread block's work runs on its SM's units, shared with the other blocks resident on that SM:
  tensor   matmul FLOPs at the rate of the instruction the kernel uses (wgmma or mma.sync; fp32 on the FMA pipe);
  MUFU     exponentials on the special-function unit;
  FMA      every other elementwise operation, one fp32 add/multiply/FMA each;
  SRAM     the bytes a kernel's warps move between shared memory and registers, 128 bytes per clock
           (`Launch.smem_per_tile`): an mma.sync kernel's operand loads (ldmatrix); rung 7's loads of L_i, D_i and
           stores of dS_ij and dQ_i's products beside its matmuls (wgmma reads its operands itself, inside the
           tensor rate; the TMA unit's copies are not counted).
Assumption (from ncu on rung 6, gpu/NOTES.md run 17: tensor pipe 52% / 71% busy, MUFU 54% / 37% at d = 64 / 128,
adding to ~1.05): a block's matmuls, its operand loads and its softmax follow one another, so a block takes
tensor + SRAM + max(MUFU, FMA) (the MUFU and FMA pipes do overlap each other). The SRAM term came from run 21:
without it rung 5's time was predicted at 0.4–0.45 of the measured on every shape. FlashAttention-3's ping-pong
and intra-warpgroup pipelining aim at max(tensor, MUFU) instead: `Time.overlapped` is that ideal.

Warpgroups taking turns (`Launch.program`, rung 7): where a kernel's compute warpgroups hand each other the tensor
pipe and wait on their own matmuls, loads and reduce-adds, a step is the longer of (a) its busiest unit, the SM's
tensor pipe, MUFU, FMA pipe or shared memory, whose bytes then include wgmma's operand reads and the TMA unit's
copies into and out of SRAM (`Launch.smem_async`; all share the SRAM's 128 bytes per clock), and (b) the warpgroups'
critical path (`sim.machine.warpgroups`): each operation of the program at the units' rates (a Work's demands on
MUFU, FMA, SRAM and, for its instructions at one a clock per warp, the issue slots, each shared with the other
warpgroup's Works that run at the same time; then the branches its warps take and the fence after its stores, where
the program counts them), wgmma groups, turns, the producer's copies and the reduce-adds with the latencies
`python -m gpu.lab.calibrate` measured (`Hardware.wgmma_clocks`, …; without them a group's latency is its time at
the tensor rate and the rest 0). The bound is then the busiest unit (`Time.in_series`), as ncu names one, not a unit the time
is proportional to.

Exposed work, in series with a block's matmuls:
  fill     its first step's tiles (`Block.prologue`: Q_i, K_0, V_0; the backward's K_j, V_j, Q_i, dO_i, L_i, D_i)
           must arrive before its first matmul, at the SM's share of DRAM bandwidth (hbm_bandwidth / SMs: cold for
           the first wave, and Q_i is read by no other block); its last stores (`Block.epilogue`: O_i, L_i; dK_j,
           dV_j) follow its last matmul, at the SM's share of L2 bandwidth (write-back: they stop in L2). Counted
           only where the block has its SM alone: a second resident block computes meanwhile. The latency of a
           first request is not modelled (gpu/NOTES.md run 33: at N = 1024, where a block makes 8 steps, rung 6
           is ×0.84–1.02 of ncu's time with this term, ×0.64–0.88 without).
  refill   a persistent block (rung 6, `Block.parts`: the tiles it walks) loads a later tile's Q_i, K_0, V_0 once the
           tile before has issued its last S_ij (06_flash2_wgmma_tma.cu's q_empty barrier): only what outlasts that
           tile's last step after its S_ij (P̃_ij V_j and the softmax: half the step's matmul FLOPs gone) and its
           stores is exposed; every tile's stores are (the consumers issue them between tiles), but for O_i where it
           leaves by TMA from a buffer of its own (O_BUF, `Launch.o_buffer`): then only the walk's last O_i is
           (`sim.machine.grids.flash2_forward`).
  block    a thread block of rung 7's main kernel (`Launch.program`) that makes any step also costs
           `Hardware.block_clocks` beside its steps and fill: its setup, its first copies' latency, a dQ product
           thrown away and one after the loop, the wait for its last reduce-adds, dK_j and dV_j, its exit. Measured
           (gpu.lab.rung7_blocks: one wave at 1 … 64 steps a block under ncu, the line's intercept less the launch and
           fill): 12,237 clocks at d = 64, 19,951 at d = 128 (a step 4,629 and 3,989): a third of a block's time at
           N = 1024, d = 64, which the model had missed (×0.71 of the events at 8 × 16, gpu/NOTES.md run 43-bwd8).
Beside the compute (asynchronous):
  dQ adds  dQ_i's float32 additions into its accumulator (`Block.atomics`), done by L2: rung 5 adds each element
           with red.global.add ("dQ atomics", at `Hardware.l2_atomic_bandwidth`), rung 7 adds whole SRAM tiles with
           TMA reduce-adds ("dQ reduce-adds", at `Hardware.l2_reduce_bandwidth`); gpu/lab/calibrate.py measures
           both in the kernels' own patterns, and each term is left out while its rate is 0 (no datasheet gives
           either). Like DRAM and L2 traffic they drain while the SMs compute: neither kernel waits inside its loop
           for an addition to land (rung 5's `red` returns nothing; rung 7's issuing thread waits only, a step
           later, for the TMA unit to have read its SRAM tile; L_i, D_i arrive by bulk copy with Q_i, dO_i, stages
           ahead: 07_flash2_backward_wgmma.cu, "loads" and "dQ").
L2 as its parts (`l2_parts`, where the hardware has them: H100): ncu's L2 utilization (lts__throughput) is the
busiest of L2's parts (the SMs → L2 port, L2 → SMs, the fabric between its two halves, tag lookups, data banks, …), and
each kind of work loads each part at its own cost per byte, measured by loops that do one kind or two (gpu.lab.
l2_parts, gpu/NOTES.md run 41-model11): reads, DRAM fills, reads across the halves, write-backs, stores in
16-byte pieces or whole lines, TMA reduce-adds. L2's busy time in the bound is its busiest part's (for the time, L2
stays one rate, `Hardware.l2_bandwidth`).
Blocks start in launch order on the slot that frees first: equal blocks run in ⌈blocks / slots⌉ waves, and a
last partial wave costs a whole block's time. DRAM and L2 traffic overlap the compute (copies are asynchronous):
the kernel takes launch overhead + the slowest of compute, DRAM bytes / DRAM bandwidth, L2 bytes (the SMs' reads,
writes and adds, and the lines L2 fills from DRAM or writes back) / L2 bandwidth and dQ's additions / their rate. A call from the host costs at least its host work: see `per_call`.
"""

import heapq
from dataclasses import dataclass, replace

from sim.machine import warpgroups
from sim.machine.grids import Block
from sim.machine.hardware import L2_WORK, Hardware
from sim.machine.launch import Launch, Phase, blocks_per_sm

TENSOR, SMEM, MUFU, FMA = "tensor", "SRAM → registers", "MUFU (exp)", "FMA"
DRAM, L2, LAUNCH = "DRAM", "L2", "launch"
FILL, ATOMICS, REDUCES = "first loads, last stores", "dQ atomics", "dQ reduce-adds"
PIPES = (TENSOR, SMEM, MUFU, FMA)  # the SMs' units, as ncu names its busiest pipe
ISSUE = "issue slots"  # the warp schedulers' (rung 7's warpgroups share them: sim.machine.warpgroups)


@dataclass(frozen=True)
class Time:
    """One kernel's predicted time and what each resource alone would take (seconds)."""

    seconds: float
    compute: float  # the SMs: blocks of tensor + SRAM + max(MUFU, FMA) + exposed work, in waves
    terms: dict[str, float]  # tensor, SRAM, MUFU, FMA, fill (in waves); dQ's additions, DRAM, L2 (chip-wide)
    launch: float
    waves: float  # blocks / slots (SMs × blocks resident on each)
    instruction: str
    adds: str = ATOMICS  # how dQ is added (ATOMICS or REDUCES): the name of that term
    in_series: bool = False  # the SMs' time is warpgroups' (Launch.program)
    busy: dict[str, float] | None = None  # the terms at the hardware's peaks (`Hardware.datasheet`); None: `terms`
    l2_parts: dict[str, float] | None = None  # seconds each of L2's parts is busy (`l2_parts`); None: L2 is one rate
    active: float = 0.0  # seconds a slot is busy on average: its blocks' time (tensor + … + exposed), launch not
    sm_busy: dict[str, float] | None = None  # each SM pipe's seconds at its peak on a slot, on average

    @property
    def bound(self) -> str:
        """The launch if it outlasts the rest, else the busiest unit (`utilization`), as ncu names its busiest pipe.
        L2 busiest with dQ's additions its longer work, and them slower than the SMs: their name (ATOMICS or
        REDUCES)."""
        memory = max(self.memory, key=self.terms.__getitem__)
        if self.launch > max(self.compute, self.terms[memory]):
            return LAUNCH
        unit = max(self.utilization, key=self.utilization.__getitem__)
        adds = self.terms[self.adds]
        return self.adds if unit == L2 and adds >= self.compute and adds > self.terms[L2] else unit

    @property
    def units(self) -> dict[str, float]:
        """Seconds each unit is busy at its peak rate: the SMs' pipes, L2 (its busiest part, where the hardware has
        them: `l2_parts`; else reads and writes, or dQ's additions: the longer) and DRAM."""
        at = self.busy or self.terms
        l2 = at[L2] if self.l2_parts else max(at[L2], at[self.adds])
        return {p: at[p] for p in PIPES} | {L2: l2, DRAM: at[DRAM]}

    @property
    def utilization(self) -> dict[str, float]:
        """Each unit's busy time at its peak (not the calibrated rates, which fold in a clock) over ncu's denominator:
        an SM pipe's over its SMs' active cycles (`…pct_of_peak_sustained_active`: `active`), L2's and DRAM's over the
        kernel's (`…_elapsed`: `seconds`); they differ where SMs idle (the launch, a last wave, unequal blocks: rung 7,
        d 64 N 1024 full 1 × 16, SMs active 0.886 of the kernel, gpu/NOTES.md run 43-bwd8)."""
        u, busy = self.units, self.sm_busy or {}
        pipes = {p: busy.get(p, u[p]) / self.active if self.active else 0.0 for p in PIPES}
        return pipes | {k: u[k] / self.seconds if self.seconds else 0.0 for k in (L2, DRAM)}

    @property
    def memory(self) -> tuple[str, ...]:
        """The terms that run beside the SMs' compute."""
        return (DRAM, L2, self.adds)

    @property
    def overlapped(self) -> float:
        """The compute roof: the time if every unit overlapped every other (launch + the slowest term)."""
        return self.launch + max(self.terms.values())


def makespan(costs: list[float], slots: int) -> float:
    """When the last block ends: blocks in order, each on the slot that frees first."""
    free = [0.0] * min(slots, len(costs))
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + c)
    return max(free, default=0.0)


def l2_parts(work: dict[str, float], hw: Hardware) -> dict[str, float]:
    """Seconds each of L2's parts is busy at its 100% (ncu's utilization of it × the kernel's time): Σ over the kinds
    of `work` (bytes by `hardware.L2_WORK` kind) of its bytes × that kind's cost on the part (`Hardware.l2_parts`,
    measured by loops that each do one or two kinds). ncu's lts__throughput is the busiest part. {} where hw has no
    parts, no work is given, or the work has a kind no loop measured (rung 5's atomics)."""
    if not hw.l2_parts or not work or any(v and k not in L2_WORK for k, v in work.items()):
        return {}
    return {part: sum(work.get(k, 0) * c for k, c in zip(L2_WORK, costs, strict=True))
            for part, costs in hw.l2_parts.items()}  # fmt: skip


def kernel_time(
    blocks: list[Block], launch: Launch, hw: Hardware, dram_bytes: int, l2_bytes: float, l2_work: dict | None = None
) -> Time:
    """Predicted time of one kernel whose blocks are `blocks` (launch order) and whose traffic is given: DRAM bytes,
    L2's bytes (its time) and, where known, L2's work by kind (`l2_parts`: its busy time, the busiest part)."""
    # blocks spread over the SMs first: an SM shares its units among the blocks resident on it, no more than fit
    per_sm = min(blocks_per_sm(launch, hw), max(1, -(-len(blocks) // hw.sm_count)))
    slots = per_sm * hw.sm_count
    # seconds per unit of work on one slot: an SM's rate shared by the blocks resident on it
    tensor = per_sm / hw.tensor_rate(launch.instruction)
    mufu = per_sm / (hw.mufu_per_clock * hw.clock_hz)
    fma = per_sm / (hw.fma_per_clock * hw.clock_hz)
    per_byte = per_sm / (hw.smem_per_clock * hw.clock_hz)  # seconds per SRAM byte
    program = launch.program
    per_tile = sum(p.smem for p in program.phases()) + launch.smem_async if program else launch.smem_per_tile
    smem = per_byte * per_tile  # seconds per tile pair
    first = (per_sm == 1) * hw.sm_count / hw.hbm_bandwidth  # seconds per byte of a first load, on an SM alone
    last = (per_sm == 1) * hw.sm_count / hw.l2_bandwidth if hw.l2_bandwidth else 0.0
    adds, rate = (REDUCES, hw.l2_reduce_bandwidth) if launch.dq_bulk else (ATOMICS, hw.l2_atomic_bandwidth)
    added = sum(b.atomics for b in blocks)

    def sm(b: Block) -> float:
        """A block's (or a persistent block's tile's) work on its SM, without its exposed loads and stores."""
        if b.parts:
            return sum(sm(t) for t in b.parts)
        if program:  # the busiest unit, or the warpgroups' critical path where it is longer
            return max(b.flops * tensor, b.exps * mufu, b.elementwise * fma, b.tiles * smem, b.tiles * step)
        return b.flops * tensor + b.tiles * smem + max(b.exps * mufu, b.elementwise * fma)

    step = 0.0
    typical = max(blocks, key=lambda b: b.tiles, default=None)  # a whole row of tile pairs
    if program and typical and typical.tiles:

        def seconds(p: Phase) -> dict[str, float]:
            """One operation's share of a tile pair on each unit, alone."""
            return {TENSOR: p.tensor * typical.flops * tensor / typical.tiles, MUFU: p.exps * typical.exps * mufu
                    / typical.tiles, FMA: p.elementwise * typical.elementwise * fma / typical.tiles,
                    SMEM: p.smem * per_byte}  # fmt: skip

        step = critical_step(program, seconds, hw)

    own = hw.block_clocks.get(program.stage, 0.0) / hw.clock_hz if program else 0.0  # a rung 7 block's own cost

    def fill(b: Block) -> float:
        """A block's exposed loads and stores (and, under a program, its own cost beside its steps where it makes
        any); a persistent block's later tiles' first loads (refill) beyond the step of the tile before them that
        follows its last S_ij (its P̃_ij V_j and softmax) and its stores."""
        refill = 0.0
        for before, t in zip(b.parts, b.parts[1:], strict=False):
            after_s = (sm(before) - before.flops / 2 * tensor) / max(1, before.tiles)
            refill += max(0.0, t.prologue * first - after_s - before.epilogue * last)
        return b.prologue * first + b.epilogue * last + refill + (own if b.tiles else 0.0)

    def block(b: Block) -> float:
        return sm(b) + fill(b)

    terms = {
        TENSOR: makespan([b.flops * tensor for b in blocks], slots),
        SMEM: makespan([b.tiles * smem for b in blocks], slots),
        MUFU: makespan([b.exps * mufu for b in blocks], slots),
        FMA: makespan([b.elementwise * fma for b in blocks], slots),
        FILL: makespan([fill(b) for b in blocks], slots),
        adds: added / rate if rate else 0.0,
        DRAM: dram_bytes / hw.hbm_bandwidth,
        L2: l2_bytes / hw.l2_bandwidth if hw.l2_bandwidth else 0.0,
    }
    compute = makespan([block(b) for b in blocks], slots)
    seconds = hw.launch_seconds + max(compute, terms[DRAM], terms[L2], terms[adds])
    stretch = max(1.0, (seconds - hw.launch_seconds) / compute) if compute else 1.0  # blocks wait on slower memory
    active = sum(block(b) for b in blocks) / slots * stretch
    peak = hw.datasheet or hw  # each term at the peak rate (makespans scale with their unit's rate)
    busy = terms | {
        TENSOR: terms[TENSOR] * hw.tensor_rate(launch.instruction) / peak.tensor_rate(launch.instruction),
        MUFU: terms[MUFU] * hw.mufu_per_clock / peak.mufu_per_clock,
        FMA: terms[FMA] * hw.fma_per_clock / peak.fma_per_clock,
        SMEM: terms[SMEM] * hw.smem_per_clock / peak.smem_per_clock,
        DRAM: terms[DRAM] * hw.hbm_bandwidth / peak.hbm_bandwidth,
        L2: terms[L2] * hw.l2_bandwidth / (peak.l2_peak_bandwidth or peak.l2_bandwidth) if hw.l2_bandwidth else 0.0,
    }
    parts = l2_parts(l2_work or {}, peak)
    if parts:
        busy[L2] = max(parts.values())
    mean = {TENSOR: sum(b.flops for b in blocks) * tensor, SMEM: sum(b.tiles for b in blocks) * smem,
            MUFU: sum(b.exps for b in blocks) * mufu, FMA: sum(b.elementwise for b in blocks) * fma}  # fmt: skip
    sm_busy = {p: mean[p] / slots * (busy[p] / terms[p] if terms[p] else 0.0) for p in PIPES}  # at their peaks
    return Time(seconds, compute, terms, hw.launch_seconds, len(blocks) / slots, launch.instruction, adds,
                bool(program), busy, parts or None, active, sm_busy)  # fmt: skip


def critical_step(program: warpgroups.Program, seconds, hw: Hardware) -> float:
    """Seconds per step of `program`'s warpgroups: each Work asks the units for `seconds(its phase)` (a dict: each
    unit's seconds alone) and the issue slots for its instructions (one a clock each, `warpgroups.ISSUE_PER_CLOCK`),
    shared with the other warpgroups' Works at the same time, then waits `hw.branch_clocks` per branch its warps
    take and the fence's `hw.fence_clocks` after its stores; each wgmma group held and completed as
    `hw.wgmma_clocks` says (else its time at the rates, as long as its latency), the turns, stages and reduce-adds
    as hw's clocks say."""
    clock = hw.clock_hz

    def resolve(ops: tuple[warpgroups.Op, ...]) -> tuple[warpgroups.Op, ...]:
        """Each Work's demands on the units it shares and its own seconds after them."""
        out = []
        for op in ops:
            if op.kind == "work":
                asks = seconds(op.phase) | {ISSUE: op.instructions / warpgroups.ISSUE_PER_CLOCK / clock}
                fence = hw.fence_clocks.get(f"{program.stage} {op.fence}", 0.0) if op.fence else 0.0
                own = (op.branches * hw.branch_clocks + fence) / clock
                op = replace(op, demand=tuple((u, s) for u, s in asks.items() if s > 0), work=own)
            out.append(op)
        return tuple(out)

    groups = {}
    for op in (op for ops in program.step for op in ops if op.kind == "issue"):
        latency, occupancy = hw.wgmma_clocks.get(op.group, (None, None))
        alone = max(seconds(op.phase).values())
        groups[op.group] = (occupancy / clock, latency / clock) if latency else (alone, alone)
    lat = warpgroups.Latencies(
        tuple((name, *g) for name, g in groups.items()),
        turn=hw.turn_clocks / clock,
        copy=hw.stage_clocks.get(program.stage, 0.0) / clock,
        reduce=hw.reduce_clocks / clock,
    )
    return warpgroups.step_seconds(tuple(map(resolve, program.first)), tuple(map(resolve, program.step)), lat)


def per_call(device_seconds: float, host_seconds: float) -> float:
    """Seconds per call of a public function called back to back (as `gpu.lab.timing.median_ms` and
    `interleaved_ms` time it): its host work (checks, allocations, launches) overlaps the previous call's kernels,
    so the slower of the two sets the pace: the GPU's seconds a call (`device_seconds`: its kernels back to back)
    or the host's (`host_seconds`).

    Shown on the H100 (gpu/NOTES.md run 42-pace15, `python -m gpu.lab.pace`): at N = 1024, 1 × 16 every call's
    events in the queued loop are its host's seconds per call in that same loop (perf_counter around the calls)
    to within 1% (forward 6: 22–42 µs a call; backward 7: 80–114), while the GPU runs the same calls in 16–21 µs
    (forward) and 36–39 µs (backward) once the host is taken out (the calls queued behind a spin kernel, or replayed
    from a CUDA graph: the two agree within 4%); where the kernels take longer (N = 16384) the events are theirs.
    The host's seconds are no constant of the machine: one call at one shape took 22 µs a call in one stretch of a
    process and 39 µs in another, so the check (`gpu.lab.check_report`) takes them from the loop that timed the
    events, else from `gpu.lab.calibrate.host_seconds` (a shape whose kernels take next to nothing)."""
    return max(device_seconds, host_seconds)
