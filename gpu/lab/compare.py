"""`flashsim compare`: the simulator, run with a GPU kernel's own tiling, beside that kernel on the same inputs."""

from dataclasses import dataclass, field

import numpy as np

import sim
from gpu import device, dtypes, flash, registry
from gpu.device import preset_for
from gpu.flash import flash_attention
from gpu.lab import counters, results, timing
from gpu.lab.harness import flops
from gpu.lab.predict import rung_prediction
from gpu.reference import attention_ref
from gpu.tiling import padded_dims
from sim.algorithms import registry as listings
from sim.core.dtypes import DTYPES
from sim.machine import hardware, iomodel
from sim.machine.prediction import Prediction

AGREE = 0.05  # predicted global traffic vs L2-level bytes: the tolerance the comparison claims


@dataclass
class Comparison:
    """What `compare` found; bytes cover every head, errors are max |x − float64| over every element."""

    config: dict
    sim_err: float
    gpu_err: float
    sim_lse_err: float
    gpu_lse_err: float
    predicted_read: int
    predicted_write: int
    flops: float
    measured_ms: float
    roofline: iomodel.Roofline | None
    hardware: str | None
    counters: dict | None  # the kernel as it runs (padded shared-memory rows)
    counters_swizzled: (
        dict | None
    )  # the kernel with XOR-swizzled rows: the same bytes asked for, whole 128-byte lines in SRAM
    counters_note: str
    gaps: list[str] = field(default_factory=list)
    prediction: Prediction | None = None  # the machine model: DRAM bytes once L2 serves re-reads, time, bound

    @property
    def roofline_hw_bandwidth(self) -> float:
        return hardware.get(self.hardware).hbm_bandwidth

    @property
    def read_ratio(self) -> float | None:
        return self.counters["l2_read_bytes"] / self.predicted_read if self.counters else None

    @property
    def swizzled_read_ratio(self) -> float | None:
        return self.counters_swizzled["l2_read_bytes"] / self.predicted_read if self.counters_swizzled else None

    @property
    def asked_ratio(self) -> float | None:
        return asked_bytes(self.counters) / self.predicted_read if self.counters else None

    @property
    def write_ratio(self) -> float | None:
        return self.counters["l2_write_bytes"] / self.predicted_write if self.counters else None


def asked_bytes(measured: dict) -> float:
    """The bytes a kernel's copies asked L2 for: cp.async instructions × 512 B (rungs 2, 3), or TMA loads (rung 6)."""
    return measured["cp_async_bytes"] + measured.get("tma_bytes", 0.0)


def compare(*, n, nk, d, batch, heads, dtype, causal, kernel=None, seed=0, profile=True) -> Comparison:
    """Run sim.run("flash2") with a forward kernel's Br, Bc and the kernel itself on one set of random inputs."""
    device.require()
    spec = flash.resolve(kernel, d)
    name = dtypes.ALIASES[dtype]
    tiles = spec.tiles_for(d, n, causal)  # as gpu.flash runs this shape (rung 6 picks its own at short rows)
    smem = spec.smem(d, tiles)
    s = np.dtype(dtypes.BY_NAME[name]).itemsize
    sram = max(smem, sum(listings.footprint("flash2", tiles.block_rows, tiles.block_cols, d, s).values()))
    q, k, v = random_host(batch, heads, n, nk, d, name, seed)

    result = sim.run(
        "flash2", q, k, v, causal=causal, block_rows=tiles.block_rows, block_cols=tiles.block_cols, sram_bytes=sram
    )
    qg, kg, vg = (to_device(x) for x in (q, k, v))
    o, lse = flash_attention(qg, kg, vg, causal=causal, kernel=spec.rung, return_lse=True)
    o_ref, lse_ref = (x.get() for x in attention_ref(qg, kg, vg, causal=causal))
    measured_ms = timing.median_ms(lambda: flash_attention(qg, kg, vg, causal=causal, kernel=spec.rung))

    props = device.properties()
    hw = preset_for(props["name"])
    roof = None
    if hw is not None:
        counts = iomodel.Counts(result.hbm_read_bytes, result.hbm_write_bytes, result.flops, result.exps)
        roof = iomodel.roofline(counts, hw, sim_dtype(name))
    shape = {"n": n, "nk": nk, "d": d, "batch": batch, "heads": heads, "dtype": name, "causal": causal}
    measured, swizzled, note = None, None, ""
    if profile and spec.tensor_cores:
        measured, note = measure_counters("forward", spec, shape)
        measured = measured and measured[spec.function]
        if measured and not spec.tma:  # rung 6's tiles are always swizzled (TMA's 128-byte pattern)
            swizzled, _ = measure_counters("forward", spec, shape, swizzle=True)
            swizzled = swizzled and swizzled[spec.function]
    elif not profile:
        note = "counters not asked for (--no-counters)"
    else:
        note = f"counters are measured for the tensor-core kernels only, not {spec.describe()}"
    config = {
        **shape,
        "kernel": spec.rung,
        "block_rows": tiles.block_rows,
        "block_cols": tiles.block_cols,
        "smem_bytes": smem,
        "sim_sram_bytes": sram,
        "device": props["name"],
        "l2_bytes": props["l2_bytes"],
    }
    c = Comparison(
        config, _max_err(result.output, o_ref), float(np.abs(dtypes.to_float32(o).get() - o_ref).max()),
        _lse_err(result.lse, lse_ref), _lse_err(lse.get(), lse_ref), result.hbm_read_bytes, result.hbm_write_bytes,
        flops(n, nk, d, batch, heads, causal), measured_ms, roof, hw.name if hw else None, measured, swizzled, note,
    )  # fmt: skip
    c.gaps = explain_gaps(c, s)
    if hw is not None:
        c.prediction = rung_prediction(
            spec, hw, n=n, nk=nk, d=d, batch=batch, heads=heads, s=s, causal=causal, tiles=tiles
        )
    return c


def report(c: Comparison, command: str | None = None) -> dict:
    """The comparison as a recorded result (gpu/lab/results.py), kind "compare-forward"."""
    return {
        "kind": "compare-forward",
        "env": results.environment(command),
        "config": c.config,
        "errors": {"sim": {"o": c.sim_err, "lse": c.sim_lse_err}, "gpu": {"o": c.gpu_err, "lse": c.gpu_lse_err}},
        "bytes": {
            "predicted": {"read": c.predicted_read, "write": c.predicted_write, **predicted_dram(c.prediction)},
            "measured": c.counters,
            "measured_swizzled": c.counters_swizzled,
            "note": c.counters_note,
            "gaps": c.gaps,
        },
        "time": {
            "measured_ms": c.measured_ms,
            "roofline_ms": c.roofline.seconds * 1e3 if c.roofline else None,
            "flops": c.flops,
            **predicted_time(c.prediction),
        },
    }


def predicted_dram(p: Prediction | None) -> dict:
    """The JSON keys of the machine model's DRAM bytes (and L2 → SM bytes), None without a preset for this GPU."""
    return {
        "dram_read": p.dram_read_bytes if p else None,
        "dram_write": p.dram_write_bytes if p else None,
        "l2_read": p.l2_to_sm_bytes if p else None,
    }


def predicted_time(p: Prediction | None) -> dict:
    """The JSON keys of the machine model's time and the resource that bounds it."""
    terms = {name: t * 1e3 for name, t in p.terms().items()} if p else None
    return {"predicted_ms": p.seconds * 1e3 if p else None, "bound": p.bound if p else None, "terms_ms": terms}


def measure_counters(direction: str, spec: registry.KernelSpec, shape: dict, swizzle=False) -> tuple[dict | None, str]:
    """(counters per launched kernel, "") or (None, why there are none)."""
    if counters.ncu_path() is None:
        return (
            None,
            "Nsight Compute (ncu) is not installed here: bytes are predicted only; time is measured with CUDA events",
        )
    try:
        return counters.measure(direction, spec.rung, **shape, swizzle=swizzle, tma=spec.tma), ""
    except counters.CounterError as e:
        return None, str(e)


def random_host(batch, heads, n, nk, d, name: str, seed: int) -> tuple[np.ndarray, ...]:
    """q, k, v on the host: standard-normal values rounded to the storage dtype `name` ("float16", …)."""
    rng = np.random.default_rng(seed)
    shapes = ((batch, heads, n, d), (batch, heads, nk, d), (batch, heads, nk, d))
    return tuple(rng.standard_normal(shape).astype(np.float32).astype(DTYPES[sim_dtype(name)]) for shape in shapes)


def explain_gaps(c: Comparison, s: int) -> list[str]:
    """Why the L2-level bytes differ from the prediction by more than AGREE (empty when they agree)."""
    if not c.counters or (abs(c.read_ratio - 1) <= AGREE and abs(c.write_ratio - 1) <= AGREE):
        return []
    d, row = c.config["d"], padded_dims(c.config["d"])[0]
    kernel = registry.recorded("forward", c.config["kernel"]).name
    reasons = []
    if row != d:
        reasons.append(
            f"{kernel} reads and writes rows padded from d = {d} to {row} elements (16-byte rows for cp.async); the simulator counts d"
        )
    if abs(c.asked_ratio - 1) <= AGREE and c.read_ratio > 1 + AGREE:
        reasons.append(
            f"the kernel asks for exactly the predicted bytes (cp.async instructions × 512 B = ×{c.asked_ratio:.3f}), but its "
            "shared-memory rows are padded by 16 bytes (so that ldmatrix is free of bank conflicts), which puts most rows' "
            "16-byte pieces across 128-byte shared-memory lines, and L1 then takes more from L2 than was asked for; the same "
            "kernel with XOR-swizzled rows (whole lines) "
            + (f"takes ×{c.swizzled_read_ratio:.3f}" if c.counters_swizzled else "takes what it asks for")
            + ", but runs slower here (gpu/NOTES.md)"
        )
    if (row * s) % 32:
        reasons.append(
            f"a row is {row * s} bytes, not a whole number of 32-byte sectors, and the counters count whole sectors"
        )
    if not reasons:
        reasons.append(f"unexplained: reads ×{c.read_ratio:.3f}, writes ×{c.write_ratio:.3f} of the prediction")
    return reasons


def sim_dtype(name: str) -> str:
    """The simulator's name of a storage dtype: "float16" → "fp16"."""
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}[name]


def to_device(x: np.ndarray):
    """A host array on the GPU (bfloat16 by its bits)."""
    cupy = device.require()
    if x.dtype == DTYPES["bf16"]:
        return cupy.asarray(x.view(np.uint16)).view(dtypes.BY_NAME["bfloat16"])
    return cupy.asarray(x)


def _max_err(o: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(o.astype(np.float64) - ref).max())


def _lse_err(lse: np.ndarray, ref: np.ndarray) -> float:
    seen = np.isfinite(ref)
    if not np.array_equal(np.isneginf(lse), ~seen):
        return float("inf")
    return float(np.abs(lse[seen].astype(np.float64) - ref[seen]).max()) if seen.any() else 0.0
