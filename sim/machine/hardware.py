"""GPU presets: the datasheet figures the memory model and the roofline estimates need."""

from dataclasses import dataclass, field, replace

from sim.core.errors import InputError

KiB = 1024
MiB = 1024 * KiB
GB = 10**9
TFLOPS = 10**12


@dataclass(frozen=True)
class Hardware:
    """One GPU, as the simulator sees it.

    `sram_bytes` is what one thread block may allocate (the capacity the simulator
    enforces); `sram_per_sm_bytes` is the SM's whole on-chip L1/shared array, the
    figure the FlashAttention paper quotes as "SRAM".
    """

    name: str
    hbm_bytes: int
    hbm_bandwidth: float  # bytes/s
    sram_bytes: int  # shared memory one thread block may use
    sram_per_sm_bytes: int
    sm_count: int
    l2_bytes: int
    peak_flops: dict  # storage dtype -> dense FLOP/s of the matmul unit (fp32: plain CUDA cores)
    source: str
    # -- below HBM and inside an SM (sim.machine: the L2 model, occupancy, the time model) --
    l2_bandwidth: float = 0.0  # bytes/s between L2 and the SMs, all SMs together
    l2_peak_bandwidth: float = 0.0  # bytes/s of L2's work at ncu's 100% (lts__throughput), the peak a busiest unit is
    # judged at (`sim.machine.timing.Time.units`); 0: l2_bandwidth
    l2_partitions: int = 1  # halves of L2 that each keep their own copy of a line SMs on both sides read
    clock_hz: float = 1e9  # the SM clock the per-clock rates below are quoted at
    smem_per_sm_bytes: int = 0  # shared memory the thread blocks on one SM may share
    smem_reserved_bytes: int = 1 * KiB  # shared memory the driver reserves per thread block (cc 8.0 and up)
    registers_per_sm: int = 65536  # 32-bit registers
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32  # resident thread blocks at most
    tensor_per_clock: dict = field(default_factory=dict)  # matmul instruction -> fp16/bf16 FLOPs per clock per SM
    mufu_per_clock: int = 16  # exponentials (ex2) per clock per SM: the special-function unit
    fma_per_clock: int = 128  # fp32 add/multiply/FMA results per clock per SM: one elementwise operation each
    smem_per_clock: int = 128  # shared-memory bytes to or from registers per clock per SM: 32 banks × 4 bytes
    launch_seconds: float = 4e-6  # a kernel launch's fixed cost, grid start to first block and last block to end
    # float32 additions L2 absorbs, bytes/s, all SMs together: per element by atomics (red.global.add, rung 5), and
    # by TMA reduce-adds of whole SRAM tiles (cp.reduce.async.bulk.tensor, rung 7). No datasheet gives either, so
    # 0 (the term left out) until `python -m gpu.lab.calibrate` measures them
    l2_atomic_bandwidth: float = 0.0
    l2_reduce_bandwidth: float = 0.0
    # latencies in SM clocks (`python -m gpu.lab.calibrate`'s "latencies", one microbenchmark each; {} / 0: not
    # measured, and `sim.machine.warpgroups` then takes a wgmma group's latency as its time at the tensor rate):
    # backward rung 7's wgmma commit groups, {"ss m64n128k16 x4": (latency, occupancy), …}; a hand-off of its turns;
    # one stage of its producer's copies, {"d64 br128": clocks, …}; one warpgroup's dQ reduce-add to its read wait;
    # one taken branch in a warp's stream of exponentials (gpu.lab.rung7_branches); a warp's wait in the fence after
    # its stores to SRAM, {"d64 br128 dS_ij": clocks, …} (the other warpgroup's wgmma reading SRAM meanwhile)
    wgmma_clocks: dict = field(default_factory=dict)
    turn_clocks: float = 0.0
    stage_clocks: dict = field(default_factory=dict)
    reduce_clocks: float = 0.0
    branch_clocks: float = 0.0
    fence_clocks: dict = field(default_factory=dict)
    # SM clocks a rung 7 main kernel's block costs beside its steps, the launch and its fill (`sim.machine.timing`,
    # "block"), {"d64 br128": clocks, …} (gpu.lab.rung7_blocks; {}: not measured); the SMs' paces' spread, below
    block_clocks: dict = field(default_factory=dict)
    sm_pace_spread: float = 0.0  # the SMs' paces' standard deviation (a share): a grid's waves drift apart (l2.paced)
    # L2 as its parts (ncu's lts__throughput is the busiest of them, `sim.machine.timing.l2_parts`): part → seconds of
    # that part at its 100% per byte of each kind of work (`L2_WORK`); {}: L2 is one rate, `l2_peak_bandwidth`
    l2_parts: dict = field(default_factory=dict)
    # a calibrated part (`calibrated`): the preset it was calibrated from, whose per-clock peaks ncu's utilizations
    # are shares of (`sim.machine.timing.Time.busy`); None: this part's own rates are the peaks
    datasheet: "Hardware | None" = None

    @property
    def l2_shared_bytes(self) -> int:
        """L2 capacity for data every SM reads: one partition's, since each partition keeps its own copy."""
        return self.l2_bytes // self.l2_partitions

    def tensor_rate(self, instruction: str) -> float:
        """FLOP/s per SM of the matmul `instruction` ("wgmma", "mma.sync" or "fma": fp32 on the CUDA cores)."""
        if instruction == "fma":
            return 2 * self.fma_per_clock * self.clock_hz
        if instruction not in self.tensor_per_clock:
            raise InputError(f"hardware: {self.name} has no {instruction!r}; it has {', '.join(self.tensor_per_clock)}")
        return self.tensor_per_clock[instruction] * self.clock_hz

    def peak(self, dtype: str) -> float:
        """Dense matmul FLOP/s for operands stored as `dtype` ("fp16", "bf16" or "fp32")."""
        return self.peak_flops[dtype]


# the kinds of work L2 does, each loading its parts at its own cost: bytes it hands the SMs (reads), fills from DRAM,
# read bytes one L2 half hands the other (a line's home half is where it is filled; `sim.machine.prediction.
# crossing_reads`), writes back to DRAM, the SMs' stores in 16-byte pieces of 32-byte sectors (rung 7's dK_j, dV_j: 4
# bytes a lane, a quad's 16 bytes of a row) and in whole lines (16 bytes a lane, a warp's 512 contiguous bytes), TMA
# reduce-adds, TMA prefetches into L2 (rung 6's producer asks for each tile's Q_i a tile ahead; its fill is a fill)
L2_WORK = ("read", "fill", "cross_read", "write_back", "store_pieces", "store_wide", "reduced", "prefetch")
PS = 1e-12
# NVIDIA H100 80GB HBM3: ps of each part at its 100% per byte of each kind of L2_WORK, fitted (least squares, costs ≥ 0,
# each loop's utilization alike) to gpu.lab.l2_parts' nine loops under ncu (l2-parts-h100.json, gpu/NOTES.md run
# 41-model11); the prefetch's from rung 6 with and without it (l2-tags-pairs-h100.json, `l2_parts.prefetch_costs`, run
# 44-model16); `python -m gpu.lab.check_model parts-report`; ncu's names without `lts__`, `_cycles_active`, `_realtime`
H100_L2_PARTS = {
    part: tuple(ps * PS for ps in costs)
    for part, costs in {  # read, fill, cross_read, write_back, store_pieces, store_wide, reduced, prefetch
        "d_atomic_input": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2287, 0.0),
        "d_sectors": (0.0471, 0.1213, 0.0, 0.0570, 0.1711, 0.0858, 0.1103, 0.0101),
        "d_sectors_fill_device": (0.0, 0.2284, 0.0001, 0.0, 0.0, 0.0, 0.0, 0.0169),
        "ltcfabric2ltc": (0.0046, 0.1841, 0.1915, 0.0242, 0.4608, 0.2318, 0.2776, 0.1143),
        "lts2xbar": (0.0803, 0.0, 0.0, 0.0, 0.0003, 0.0002, 0.0003, 0.0067),
        "t_sectors": (0.0576, 0.0298, 0.0, 0.0036, 0.2287, 0.1151, 0.1132, 0.1739),
        "t_tag_requests": (0.0432, 0.0536, 0.0, 0.0295, 0.6848, 0.0878, 0.0844, 0.1357),
        "throughput_internal_activity": (0.0424, 0.0559, 0.0, 0.0374, 0.6831, 0.0863, 0.0801, 0.0709),
        "xbar2lts": (0.0375, 0.0, 0.0, 0.0, 0.9118, 0.2290, 0.2865, 0.0554),
    }.items()
}
H100_LATENCIES = {  # SM clocks, NVIDIA H100 80GB HBM3 (`python -m gpu.lab.calibrate`, 2026-11-27, run 39-model8)
    "wgmma_clocks": {
        "ss m64n128k16 x4": (317, 256),
        "ss m64n64k16 x8": (349, 256),
        "rs m64n64k16 x16": (571, 513),
        "rs m64n128k16 x8": (558, 513),
        "ss-nmajor m64n64k16 x8": (344, 256),
    },
    "turn_clocks": 32,
    "stage_clocks": {"d64 br128": 1254, "d128 br64": 1187},
    "reduce_clocks": 2505,
    "branch_clocks": 9.7,
    "fence_clocks": {"d64 br128 dS_ij": 241, "d64 br128 τ dQ_i": 333, "d128 br64 dS_ij": 199, "d128 br64 τ dQ_i": 525},
    "block_clocks": {"d64 br128": 12237, "d128 br64": 19951},  # gpu.lab.rung7_blocks, rung7-blocks-h100.json (run 43)
}
A100_40GB = Hardware(
    name="A100-40GB",
    hbm_bytes=40 * GB,
    hbm_bandwidth=1555 * GB,
    sram_bytes=163 * KiB,
    sram_per_sm_bytes=192 * KiB,
    sm_count=108,
    l2_bytes=40 * MiB,
    peak_flops={"fp16": 312 * TFLOPS, "bf16": 312 * TFLOPS, "fp32": 19.5 * TFLOPS},
    source="NVIDIA A100 datasheet (SXM4 40GB) and CUDA C++ Programming Guide, compute capability 8.0",
    # A100 whitepaper: L2 read bandwidth 5120 bytes per clock; boost clock 1410 MHz
    l2_bandwidth=5120 * 1.41e9,
    l2_partitions=2,  # A100 whitepaper: "the L2 cache is divided into two partitions"
    clock_hz=1.41e9,
    smem_per_sm_bytes=164 * KiB,  # Programming Guide, cc 8.0: 164 KB per SM, 163 KB per block
    # 312 TFLOP/s = 108 SMs × 2048 FLOPs per clock × 1.41 GHz; no wgmma before Hopper
    tensor_per_clock={"mma.sync": 2048},
    fma_per_clock=64,  # Programming Guide, arithmetic instruction throughput, cc 8.0: 64 fp32 add/mul/fma
)
H100_SXM = Hardware(
    name="H100-SXM",
    hbm_bytes=80 * GB,
    hbm_bandwidth=3350 * GB,
    sram_bytes=227 * KiB,
    sram_per_sm_bytes=256 * KiB,
    sm_count=132,
    l2_bytes=50 * MiB,
    peak_flops={"fp16": 989.4 * TFLOPS, "bf16": 989.4 * TFLOPS, "fp32": 66.9 * TFLOPS},
    source="NVIDIA H100 datasheet (SXM5) and CUDA C++ Programming Guide, compute capability 9.0",
    # not in NVIDIA's datasheet (Chips and Cheese measured ~5.5 TB/s on H100 PCIe, "Nvidia's H100: Funny L2, and Tons
    # of Bandwidth", 2023): gpu/lab/calibrate.py's l2_read on the lent H100 SXM, 8.40 TB/s (calibration-h100.json,
    # run 39-model8); ncu's L2 throughput of rung 3's reads implies a peak of 8.7–8.8 TB/s at N = 16384 (run 40-model9)
    l2_bandwidth=8.4e12,
    # that loop's 8.46 TB/s (run 40-model9, calibrate's `stream`, 16 MiB 64 times) is 82.2% of ncu's lts__throughput
    # (a TMA bulk-copy loop: 7.6 TB/s at 83.7%): L2's peak as ncu counts it is 8.46 / 0.822 = 10.3 TB/s
    l2_peak_bandwidth=10.3e12,
    # two partitions, as on A100 (Chips and Cheese, ibid.: the far half answers like a separate cache); run 21's
    # backward at d = 128, N = 16384 read from DRAM what a 25 MiB L2 predicts (gpu/NOTES.md)
    l2_partitions=2,
    clock_hz=1.83e9,  # the clock the datasheet's 989.4 TFLOP/s holds at: 132 SMs × 4096 FLOPs per clock
    smem_per_sm_bytes=228 * KiB,  # Programming Guide, cc 9.0: 228 KB per SM, 227 KB per block
    # wgmma: the datasheet's dense rate; mma.sync reaches about 2/3 of it on H100 (FlashAttention-3 paper, §1)
    tensor_per_clock={"wgmma": 4096, "mma.sync": 4096 * 2 // 3},
    fma_per_clock=128,  # Programming Guide, arithmetic instruction throughput, cc 9.0: 128 fp32 add/mul/fma
    # no datasheet gives latencies: gpu/lab/results/calibration-h100.json's (gpu/NOTES.md run 37-model6), rounded
    **H100_LATENCIES,  # wgmma_clocks, turn_clocks, stage_clocks, reduce_clocks, branch_clocks, fence_clocks, block_clocks
    l2_parts=H100_L2_PARTS,
    sm_pace_spread=0.006,  # rung 7's mean block time per SM: 0.50, 0.60, 0.69% (rung7-paces-h100.json)
)
PRESETS: dict[str, Hardware] = {
    h.name: h
    for h in [
        A100_40GB,
        replace(  # the same chip with HBM2e
            A100_40GB,
            name="A100-80GB",
            hbm_bytes=80 * GB,
            hbm_bandwidth=2039 * GB,
            source="NVIDIA A100 datasheet (SXM4 80GB) and CUDA C++ Programming Guide, compute capability 8.0",
        ),
        H100_SXM,
        replace(  # the same chip with more and faster HBM3e
            H100_SXM,
            name="H200",
            hbm_bytes=141 * GB,
            hbm_bandwidth=4800 * GB,
            l2_bytes=60 * MiB,
            source="NVIDIA H200 datasheet (SXM); L2 size as the device reports it (cudaDeviceProp.l2CacheSize)",
            # kept from the H100: clocks, tensor rates, latencies and L2's part costs (l2_parts), all of the GH100 die
            # and fitted on the lent H100 (gpu/NOTES.md runs 37-model6, 41-model11); not measured on an H200
        ),
        Hardware(
            name="RTX-4090",
            hbm_bytes=24 * GB,
            hbm_bandwidth=1008 * GB,
            sram_bytes=99 * KiB,
            sram_per_sm_bytes=128 * KiB,
            sm_count=128,
            l2_bytes=72 * MiB,
            peak_flops={"fp16": 165.2 * TFLOPS, "bf16": 165.2 * TFLOPS, "fp32": 82.6 * TFLOPS},
            source="NVIDIA Ada GPU architecture whitepaper (fp16/bf16 tensor with fp32 accumulate); "
            "CUDA C++ Programming Guide, compute capability 8.9",
            l2_bandwidth=5e12,  # not published: assumed of the order of the other parts' (a guess)
            clock_hz=2.52e9,  # boost clock (Ada whitepaper)
            smem_per_sm_bytes=100 * KiB,  # Programming Guide, cc 8.9: 100 KB per SM, 99 KB per block
            threads_per_sm=1536,
            blocks_per_sm=24,
            tensor_per_clock={"mma.sync": 512},  # 165.2 TFLOP/s = 128 SMs × 512 FLOPs per clock × 2.52 GHz
        ),
        Hardware(
            name="toy",
            hbm_bytes=1 * MiB,
            hbm_bandwidth=1 * GB,
            sram_bytes=1 * KiB,
            sram_per_sm_bytes=1 * KiB,
            sm_count=1,
            l2_bytes=0,
            peak_flops={"fp16": 10**9, "bf16": 10**9, "fp32": 10**9},
            source="a made-up part small enough to watch every byte (1 KiB of SRAM)",
            l2_bandwidth=1 * GB,
            smem_per_sm_bytes=2 * KiB,
            smem_reserved_bytes=0,
            tensor_per_clock={"mma.sync": 1},
            mufu_per_clock=1,
            fma_per_clock=1,
            launch_seconds=0.0,
        ),
    ]
}

DEFAULT = "A100-40GB"


def get(name: str) -> Hardware:
    """The preset called `name` (case-insensitive)."""
    for key, hw in PRESETS.items():
        if key.lower() == name.lower():
            return hw
    raise InputError(f"hardware: unknown preset {name!r}; choose one of {', '.join(PRESETS)}")


def latencies_of(recorded: dict) -> dict:
    """A calibration's "latencies" as `Hardware`'s fields (wgmma groups as (latency, occupancy) pairs)."""
    groups = recorded.get("wgmma_clocks", {})
    return {
        "wgmma_clocks": {k: (v["latency"], v["occupancy"]) for k, v in groups.items()},
        "turn_clocks": recorded.get("turn_clocks", 0.0),
        "stage_clocks": dict(recorded.get("stage_clocks", {})),
        "reduce_clocks": recorded.get("reduce_clocks", 0.0),
        "branch_clocks": recorded.get("branch_clocks", 0.0),
        "fence_clocks": {k: v for k, v in recorded.get("fence_clocks", {}).items() if k != "alone"},
    }


def calibrated(hw: Hardware, rates: dict, latencies: dict | None = None) -> Hardware:
    """`hw` with the rates `python -m gpu.lab.calibrate` measured (a recording's "rates"): DRAM and L2 bandwidth,
    MUFU and FMA rates per SM (as per-clock figures at hw's clock), every tensor instruction scaled by the measured
    over the datasheet fp16 rate, the launch overhead, and (where the recording has them) L2's rates of atomic and
    of bulk (TMA) reduce-adds; with the recording's "latencies" (`latencies`), those too (else hw's stay). The
    preset stays as `datasheet`: a measured rate is a peak per clock × the clock the microbenchmark ran at × the
    share of peak it reached (run 40-model9: the MUFU loop at 1.99 GHz, cuBLAS at 1.5–1.8 GHz), so which unit is
    busiest is judged at the preset's peaks."""
    for key in ("dram_read", "l2_read", "exp2_per_sm", "fma_per_sm", "tensor_fp16", "launch_seconds"):
        value = rates.get(key) if isinstance(rates, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
            raise InputError(f"calibration: {key!r} must be a positive number, got {value!r}")
    adds = {}
    for key in ("l2_atomic", "l2_bulk_reduce"):  # older recordings lack them (l2_atomic: before run 33): terms left out
        value = rates.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
            raise InputError(f"calibration: {key!r} must be a number ≥ 0, got {value!r}")
        adds[key] = value
    tensor = rates["tensor_fp16"] / hw.peak("fp16")
    return replace(
        hw,
        name=f"{hw.name} (calibrated)",
        hbm_bandwidth=rates["dram_read"],
        l2_bandwidth=rates["l2_read"],
        mufu_per_clock=rates["exp2_per_sm"] / hw.clock_hz,
        fma_per_clock=rates["fma_per_sm"] / hw.clock_hz,
        tensor_per_clock={k: v * tensor for k, v in hw.tensor_per_clock.items()},
        launch_seconds=rates["launch_seconds"],
        l2_atomic_bandwidth=adds["l2_atomic"],
        l2_reduce_bandwidth=adds["l2_bulk_reduce"],
        **(latencies_of(latencies) if latencies else {}),
        datasheet=hw.datasheet or hw,
    )
