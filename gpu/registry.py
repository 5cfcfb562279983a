"""The kernel ladder: one KernelSpec per kernel of gpu/kernels/ (source, #defines, tiling, dtypes, launch geometry).

The launchers, the harness (`python -m gpu.lab.harness --kernel N`), the tests, compare and bench read this and
nothing else about a kernel. Rungs are numbered as their files: 1–3 and 6 forward, 4, 5 and 7 backward, 8 decode; the helpers
(the standard baseline's softmax kernels, the backward's two element-wise passes, decoding's combine) have no number. Pure Python.
"""

import warnings
from collections.abc import Callable
from dataclasses import dataclass

from gpu import geometry
from gpu.geometry import HALF_SIZE, SOFTMAX_THREADS, STORAGE_CODE  # noqa: F401  (what the launchers read here)
from gpu.tiling import Tiles, padded_dims
from sim.core.errors import InputError

HALF = ("float16", "bfloat16")
ALL = ("float32", "float16", "bfloat16")
VARIANTS = ("gqa", "window", "alibi", "softcap", "packed")  # gpu/variants.py's Variant.kinds


@dataclass(frozen=True)
class KernelSpec:
    """One kernel: where its source is, what it accepts, how it is tiled, compiled and launched."""

    name: str  # "rung 6" for a rung of the ladder, the helper's name for a helper
    rung: int | None  # its number on the ladder (the file's prefix), what `kernel=` selects; None for helpers
    direction: str  # "forward", "backward" or "helper"
    file: str
    function: str
    dtypes: tuple[str, ...]
    tensor_cores: bool  # rows in device memory padded to 8 elements; fp16/bf16 only
    default_tiles: Callable[[int], Tiles] | None  # head dim d → the tiling it uses by default
    defines_of: Callable[[int, str, Tiles | None], dict[str, int]]  # (d, dtype, tiles) → the #defines injected
    smem_of: Callable[[int, Tiles | None], int]  # (d, tiles) → dynamic shared memory per thread block, in bytes
    scale_log2: bool = False  # takes τ · log2 e (exp2 kernels) instead of τ
    arch: str | None = None  # the one target it compiles for ("sm_90a"), None: any the device has (sm_80 and up)
    head_dims: tuple[int, ...] | None = None  # the head dims it takes; None: every d up to 128
    tma: bool = False  # takes tensor maps of Q, K, V (gpu/tma.py) instead of their pointers
    variants: tuple[str, ...] = ()  # the variants it takes, of VARIANTS (gpu/variants.py)
    shape_tiles: Callable[[int, int, bool], Tiles] | None = None  # (d, N, causal) → a call's tiling

    def row(self, d: int) -> int:
        """Elements per row of Q, K, V (and O, dO, dQ, dK, dV) in device memory for head dim d."""
        return padded_dims(d)[0] if self.tensor_cores else d

    def tiles(self, d: int, tiles: Tiles | None = None) -> Tiles | None:
        """`tiles` if given, else the default for head dim d (None for the helpers, which have no tiling)."""
        return tiles or (self.default_tiles(d) if self.default_tiles else None)

    def tiles_for(self, d: int, n: int, causal: bool, tiles: Tiles | None = None) -> Tiles | None:
        """`tiles` if given, else the tiling a call with head dim d, N query rows and `causal` gets."""
        return tiles or (self.shape_tiles(d, n, causal) if self.shape_tiles else self.tiles(d))

    def defines(self, d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
        """The #defines its launcher injects for head dim d (or, for the helpers, row length d) and `dtype`."""
        return self.defines_of(d, dtype, self.tiles(d, tiles))

    def smem(self, d: int, tiles: Tiles | None = None) -> int:
        """Dynamic shared memory one thread block allocates, in bytes."""
        return self.smem_of(d, self.tiles(d, tiles))

    def fits(self, d: int, cc: str) -> str | None:
        """None if it runs head dim d on a device of compute capability `cc` ("9.0"), else why not."""
        if self.arch and cc != f"{self.arch[3]}.{self.arch[4]}":
            return f"{self.name} runs on compute capability {self.arch[3]}.{self.arch[4]} only ({self.arch}), this GPU is {cc}"
        if self.head_dims and d not in self.head_dims:
            return f"{self.name} takes head dims {' and '.join(map(str, self.head_dims))}, got d={d}"
        return None

    def describe(self) -> str:
        """'rung 2 (forward, 02_flash2_tensorcore.cu)'."""
        return f"rung {self.rung} ({self.direction}, {self.file})"


# -- forward --------------------------------------------------------------------------


def _forward(rung, file, symbol, **kw) -> KernelSpec:
    """Rung `rung`'s spec; `symbol` names its __global__ function in the .cu (flash2_v4_fwd is rung 6's: the CUDA
    names, and the recordings that key on them, kept the pre-issue-19 v-names)."""
    return KernelSpec(f"rung {rung}", rung, "forward", file, f"flash2_{symbol}_fwd", **kw)


FORWARD = {
    1: _forward(1, "01_flash2_readable.cu", "v1", dtypes=ALL, tensor_cores=False, default_tiles=geometry.readable_tiles,
                   defines_of=geometry.readable_defines,
                   smem_of=geometry.forward_readable_smem),
    2: _forward(2, "02_flash2_tensorcore.cu", "v2", dtypes=HALF, tensor_cores=True, default_tiles=geometry.forward_tc_tiles,
                   defines_of=geometry.forward_tc_defines, smem_of=geometry.forward_tc_smem, scale_log2=True),
    3: _forward(3, "03_flash2_lane_offsets.cu", "v3", dtypes=HALF, tensor_cores=True,
                   default_tiles=geometry.forward_rung3_tiles, defines_of=geometry.forward_tc_defines, smem_of=geometry.forward_tc_smem, scale_log2=True,
                   variants=VARIANTS),
    6: _forward(6, "06_flash2_wgmma_tma.cu", "v4", dtypes=HALF, tensor_cores=True, default_tiles=geometry.forward_wg_tiles,
                   defines_of=geometry.forward_wg_defines, smem_of=geometry.forward_wg_smem, scale_log2=True, arch="sm_90a",
                   head_dims=(64, 128), tma=True, variants=VARIANTS, shape_tiles=geometry.forward_wg_shape_tiles),
}  # fmt: skip
DEFAULT_FORWARD = 3  # the default on every GPU, and for every head dim …
HOPPER_FORWARD = 6  # … except on sm_90 (H100, H200) at the head dims rung 6 takes

# -- backward -------------------------------------------------------------------------


def _backward(rung, file, symbol, **kw) -> KernelSpec:
    """Rung `rung`'s spec; `symbol` as in `_forward` (flash2_v2_bwd is rung 5's)."""
    return KernelSpec(f"rung {rung}", rung, "backward", file, f"flash2_{symbol}_bwd", **kw)


BACKWARD = {
    4: _backward(4, "04_flash2_backward_readable.cu", "v1", dtypes=ALL, tensor_cores=False,
                    default_tiles=geometry.readable_tiles, defines_of=geometry.readable_defines,
                    smem_of=geometry.backward_readable_smem),
    5: _backward(5, "05_flash2_backward_tensorcore.cu", "v2", dtypes=HALF, tensor_cores=True,
                    default_tiles=geometry.backward_tc_tiles, defines_of=geometry.backward_tc_defines, smem_of=geometry.backward_tc_smem,
                    variants=VARIANTS),
    7: _backward(7, "07_flash2_backward_wgmma.cu", "wgmma", dtypes=HALF, tensor_cores=True,
                       default_tiles=geometry.backward_wg_tiles, defines_of=geometry.backward_wg_defines, smem_of=geometry.backward_wg_smem,
                       arch="sm_90a", head_dims=(64, 128), tma=True, variants=VARIANTS),
}  # fmt: skip
DEFAULT_BACKWARD = 5  # the default on every GPU, and for every head dim …
HOPPER_BACKWARD = 7  # … except on sm_90 at the head dims where rung 7 measured faster than rung 5
HOPPER_BACKWARD_DIMS = (64, 128)  # run 32: +28 … +66% over rung 5 at d = 64, +43 … +84% at d = 128
# … and where rung 7 takes every variant of the call (it takes them all since run 47, as rung 5 does)

# -- decode: Flash-Decoding over a contiguous or paged K/V cache (gpu/decoding.py) ----------------------------------

DECODE = {
    8: KernelSpec("rung 8", 8, "decode", "08_flash_decoding.cu", "flash_decoding_split", HALF, True, geometry.decoding_tiles,
                  geometry.decoding_defines, geometry.decoding_smem, scale_log2=True, head_dims=(64, 128)),
}  # fmt: skip

# -- helpers: the standard baseline's row kernels, the backward's element-wise passes ---------------------------


def _helper(name, file, function, dtypes, defines) -> KernelSpec:
    return KernelSpec(name, None, "helper", file, function, dtypes, False, None, defines, lambda d, t: 0)


HELPERS = {
    "hopper_probe": KernelSpec("hopper_probe", None, "helper", "hopper_probe.cu", "hopper_probe", HALF, False, None,
                               geometry.probe_defines, lambda d, t: 1024 + HALF_SIZE * d * (64 + 2 * (192 - d)) + 8,
                               arch="sm_90a", head_dims=(64, 128), tma=True),
    "softmax": _helper("softmax", "softmax_rows.cu", "softmax_rows", HALF, geometry.rows_defines),
    "softmax_backward": _helper("softmax_backward", "softmax_backward_rows.cu", "softmax_backward_rows", HALF, geometry.rows_defines),
    "bwd_prepass": _helper("bwd_prepass", "backward_passes.cu", "flash2_bwd_prepass", ALL, geometry.passes_defines),
    "bwd_dq": _helper("bwd_dq", "backward_passes.cu", "flash2_bwd_dq", ALL, geometry.passes_defines),
    "read_ceiling": _helper("read_ceiling", "read_ceiling.cu", "read_ceiling", HALF, geometry.read_defines),
    "racecheck_probe": KernelSpec("racecheck_probe", None, "helper", "racecheck_probe.cu", "racecheck_probe", HALF,
                                  False, None, geometry.handoff_defines, lambda d, t: 0, arch="sm_90a", head_dims=(64,)),
    "decode_combine": KernelSpec("decode_combine", None, "helper", "08_flash_decoding.cu", "flash_decoding_combine", HALF,
                                 True, geometry.decoding_tiles, geometry.decoding_defines, lambda d, t: 0, head_dims=(64, 128)),
}  # fmt: skip

LADDER = {spec.rung: spec for spec in (*FORWARD.values(), *BACKWARD.values())}
ALL_SPECS = (*FORWARD.values(), *BACKWARD.values(), *DECODE.values(), *HELPERS.values())
# LADDER holds the rungs that `gpu.lab.harness` and `ladder` check and time as attention forward/backward passes;
# rung 8 decodes (a few rows against a cache): `flashsim bench decode` and `gpu.lab.compare_decode` measure it.


# The rungs' names before issue 19 (kernel="v4" is rung 6): still taken, with a FutureWarning, for one release.
OLD_NAMES = {"forward": {"v1": 1, "v2": 2, "v3": 3, "v4": 6}, "backward": {"v1": 4, "v2": 5}}


def forward(kernel: int | str | None, d: int | None = None, cc: str | None = None) -> KernelSpec:
    """The forward rung `kernel` (1, 2, 3 or 6), or InputError naming them. None: the default for head dim d on a
    device of compute capability cc (rung 6 where it fits, else rung 3); without d and cc, rung 3."""
    if kernel is None:
        fast = FORWARD[HOPPER_FORWARD]
        kernel = HOPPER_FORWARD if d is not None and cc is not None and fast.fits(d, cc) is None else DEFAULT_FORWARD
    return _pick("forward", FORWARD, kernel)


def backward(kernel: int | str | None, d: int | None = None, cc: str | None = None, variants=()) -> KernelSpec:
    """The backward rung `kernel` (4, 5 or 7), or InputError naming them. None: the default for head dim d on a
    device of compute capability cc and a call using `variants` (of VARIANTS): rung 7 on sm_90 at the head dims in
    HOPPER_BACKWARD_DIMS where it takes each of them, else rung 5; without d and cc, rung 5."""
    if kernel is None:
        fast = BACKWARD[HOPPER_BACKWARD]
        takes = set(variants) <= set(fast.variants)
        picked = d in HOPPER_BACKWARD_DIMS and cc is not None and fast.fits(d, cc) is None and takes
        kernel = HOPPER_BACKWARD if picked else DEFAULT_BACKWARD
    return _pick("backward", BACKWARD, kernel)


def rung(number: int) -> KernelSpec:
    """Rung `number` of the ladder, or InputError naming the rungs."""
    if number not in LADDER:
        raise InputError(f"kernel: expected a rung number among {', '.join(map(str, sorted(LADDER)))}, got {number!r}")
    return LADDER[number]


def number(direction: str, kernel: int | str, *, warn: bool = True) -> int | str:
    """`kernel` as a rung number: 6 and "6" are rung 6; an old name ("v4") is its rung, with a FutureWarning unless
    `warn` is False (a recording made before the rename names its kernel so)."""
    old = OLD_NAMES[direction].get(kernel) if isinstance(kernel, str) else None
    if old is not None and warn:
        warnings.warn(
            f"kernel {kernel!r} is the old name of rung {old}: write {old} (the v-names go in the next release)",
            FutureWarning,
            stacklevel=4,
        )
    if old is not None:
        return old
    if isinstance(kernel, str) and kernel.strip().isdigit():
        return int(kernel)
    return kernel


def recorded(direction: str, kernel: int | str) -> KernelSpec:
    """The rung a recording's config names, by its number or its old name, without a warning."""
    return _pick(direction, FORWARD if direction == "forward" else BACKWARD, number(direction, kernel, warn=False))


def _pick(direction: str, table: dict[int, KernelSpec], kernel) -> KernelSpec:
    kernel = number(direction, kernel)
    if not isinstance(kernel, int) or isinstance(kernel, bool) or kernel not in table:
        raise InputError(f"kernel: the {direction} rungs are {', '.join(map(str, table))}, got {kernel!r}")
    return table[kernel]
