"""GPU presets: the datasheet figures the memory model and the roofline estimates need."""

from dataclasses import dataclass, replace

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

    def peak(self, dtype: str) -> float:
        """Dense matmul FLOP/s for operands stored as `dtype` ("fp16", "bf16" or "fp32")."""
        return self.peak_flops[dtype]


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
