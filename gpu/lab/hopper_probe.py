"""`python -m gpu.lab.hopper_probe`: proves rung 6's toolchain path on this GPU before the kernel itself runs.

NVRTC compiles hopper_probe.cu for sm_90a; tensor maps come from the driver (gpu/tma.py); one thread block copies
three tiles by TMA and multiplies them with both forms of wgmma rung 6 uses. Each product is checked against
float64 NumPy: the inputs are fp16/bf16 values, their products exact in fp32, so only the fp32 sums of at most
128 terms round: |error| ≤ 128 · 2⁻²³ · Σ|terms|, well under TOL · Σ|terms|.
"""

import sys

import numpy as np

from gpu import device, dtypes, registry, source, tma

TOL = 1e-4  # of Σ|a·b| over the row and column: fp32 sums of ≤ 128 exact products err by ≤ 1.5e-5 of it


def probe(d: int, dtype: str, seed: int = 0) -> dict[str, float]:
    """{'scores': error / bound, 'values': error / bound} for one head dim and dtype: each below 1 is a pass."""
    cupy = device.require()
    spec = registry.HELPERS["hopper_probe"]
    defines = spec.defines(d, dtype)
    bc = defines["BC"]
    rng = cupy.random.default_rng(seed)

    def rand(*shape):
        return dtypes.from_float32(rng.standard_normal(shape, dtype=cupy.float32), dtype)

    a, b, v, p = rand(1, 1, 64, d), rand(1, 1, bc, d), rand(1, 1, bc, d), rand(64, bc)
    s, c = cupy.full((64, bc), cupy.nan, cupy.float32), cupy.full((64, d), cupy.nan, cupy.float32)
    smem = spec.smem(d)
    fn = source.function(spec, defines, smem)
    fn(
        (1, 1, 1),
        (128, 1, 1),
        (tma.rows_map(a, 64), tma.rows_map(b, bc), tma.rows_map(v, bc), p, s, c),
        shared_mem=smem,
    )
    a64, b64, v64, p64 = (dtypes.to_float32(x).get().astype(np.float64).reshape(-1, x.shape[-1]) for x in (a, b, v, p))
    return {
        "scores": _ratio(s.get(), a64 @ b64.T, np.abs(a64) @ np.abs(b64.T)),
        "values": _ratio(c.get(), p64 @ v64, np.abs(p64) @ np.abs(v64)),
    }


def _ratio(got: np.ndarray, ref: np.ndarray, magnitude: np.ndarray) -> float:
    err = np.nan_to_num(np.abs(got - ref), nan=np.inf)
    return float((err / (TOL * magnitude)).max())


def main() -> int:
    cc = device.capability()
    if cc != "9.0":
        print(f"rung 6 needs compute capability 9.0 (sm_90a); this GPU is {cc}: nothing to probe")
        return 0
    failed = 0
    for d in (64, 128):
        for dtype in ("float16", "bfloat16"):
            r = probe(d, dtype)
            ok = all(x < 1 for x in r.values())
            failed += not ok
            print(
                f"d={d:3d} {dtype:8s} scores (wgmma from SRAM) {r['scores']:.3f}  values (A from registers) {r['values']:.3f}  {'ok' if ok else 'FAIL'}"
            )
    print("hopper probe:", "all ok" if not failed else f"{failed} FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
