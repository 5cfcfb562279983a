"""The kernel ladder: one KernelSpec per kernel of gpu/kernels/ (source, #defines, tiling, dtypes, launch geometry).

The launchers, the harness (`python -m gpu.lab.harness --kernel N`), the tests, compare and bench read this and
nothing else about a kernel. Rungs are numbered as their files: 1–3 and 6 forward, 4, 5 and 7 backward; the helpers (the
standard baseline's softmax kernels, the backward's two element-wise passes) have no number. Pure Python.
"""

from collections.abc import Callable
from dataclasses import dataclass

from gpu.tiling import (
    Tiles,
    backward_tiles,
    backward_warpgroup_tiles,
    forward_tiles,
    pad_to,
    padded_dims,
    warpgroup_tiles,
)
from sim.core.dtypes import F
from sim.core.errors import InputError

STORAGE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
HALF = ("float16", "bfloat16")
ALL = ("float32", "float16", "bfloat16")
HALF_SIZE = 2  # bytes of an fp16/bf16 element: the tensor-core kernels' storage


@dataclass(frozen=True)
class KernelSpec:
    """One kernel: where its source is, what it accepts, how it is tiled, compiled and launched."""

    name: str  # what `kernel=` selects among its direction's rungs ("v1", "v2", …), or the helper's name
    rung: int | None  # its number on the ladder (the file's prefix); None for helpers
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

    def row(self, d: int) -> int:
        """Elements per row of Q, K, V (and O, dO, dQ, dK, dV) in device memory for head dim d."""
        return padded_dims(d)[0] if self.tensor_cores else d

    def tiles(self, d: int, tiles: Tiles | None = None) -> Tiles | None:
        """`tiles` if given, else the default for head dim d (None for the helpers, which have no tiling)."""
        return tiles or (self.default_tiles(d) if self.default_tiles else None)

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
        """'rung 2 (forward v2, 02_flash2_tensorcore.cu)'."""
        return f"rung {self.rung} ({self.direction} {self.name}, {self.file})"


def _mma_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    row, d_mma = padded_dims(d)
    return {
        "HEAD_DIM": row,
        "D_MMA": d_mma,
        "NWARPS": tiles.warps,
        "MIN_BLOCKS": tiles.min_blocks,
        "STORAGE": STORAGE_CODE[dtype],
    }


def _readable_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return {
        "HEAD_DIM": d,
        "BR": tiles.block_rows,
        "BC": tiles.block_cols,
        "NTHREADS": tiles.threads,
        "STORAGE": STORAGE_CODE[dtype],
    }


def _readable_tiles(d: int) -> Tiles:
    return Tiles(block_rows=32, block_cols=32, warps=4)


# -- forward --------------------------------------------------------------------------


def _forward_tc_tiles(d: int) -> Tiles:
    """Rungs 2 and 3 by default (the measurements behind each choice: gpu/NOTES.md)."""
    if padded_dims(d)[1] <= 64:
        return forward_tiles(warps=4, m_tiles=2, block_cols=64, min_blocks=2)
    return forward_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2)


def _forward_v3_tiles(d: int) -> Tiles:
    """Rung 3 by default: rung 2's, but Bc = 48 for d > 64 (run 9: 342 / 289 TFLOP/s against Bc = 32's 310 / 267)."""
    if padded_dims(d)[1] <= 64:
        return _forward_tc_tiles(d)
    return forward_tiles(warps=4, m_tiles=2, block_cols=48, q_in_regs=False, min_blocks=2)


def _forward_tc_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return _mma_defines(d, dtype, tiles) | {
        "M_TILES": tiles.m_tiles,
        "BC": tiles.block_cols,
        "Q_IN_REGS": int(tiles.q_in_regs),
        "SWIZZLE": int(tiles.swizzle),
    }


def _forward_tc_smem(d: int, tiles: Tiles) -> int:
    """Q_i (Br rows) and two stages each of K_j and V_j (Bc rows), padded or swizzled rows."""
    d_mma = padded_dims(d)[1]
    row = pad_to(d_mma, 64) if tiles.swizzle else d_mma + 8
    return HALF_SIZE * (tiles.block_rows + 4 * tiles.block_cols) * row


def _forward_readable_smem(d: int, tiles: Tiles) -> int:
    """Q_i, O_i (Br × d), K_j, V_j (Bc × d), S_ij (Br × Bc), m_i, ℓ_i and the rescale factors (Br), float32."""
    br, bc = tiles.block_rows, tiles.block_cols
    return F * (2 * br * d + 2 * bc * d + br * bc + 3 * br)


def _forward_wg_tiles(d: int) -> Tiles:
    """Rung 6 by default, Bc = 128 and three stages of K_j/V_j (gpu/NOTES.md, runs 13 and 14, fp16, N = 4096, TFLOP/s
    full / causal): d = 64, three consumer warpgroups taking turns (Br = 192, ping-pong) 456 / 365 against two
    warpgroups' 349 / 191; d = 128, two warpgroups without turns 583 / 483 (with turns 575 / 468; two stages 456 / 390)."""
    if d == 64:
        return warpgroup_tiles(consumers=3, block_cols=128, stages=3, pingpong=True)
    return warpgroup_tiles(consumers=2, block_cols=128, stages=3)


def _forward_wg_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    consumers = tiles.warps // 4 - 1
    return {
        "HEAD_DIM": d,
        "BC": tiles.block_cols,
        "CONSUMERS": consumers,
        "STAGES": tiles.stages,
        "PINGPONG": int(tiles.pingpong),
        "STORAGE": STORAGE_CODE[dtype],
    }


def _forward_wg_smem(d: int, tiles: Tiles) -> int:
    """1024 bytes to align the tiles to the swizzle pattern, Q_i, the stages of K_j and V_j, the mbarriers."""
    return 1024 + HALF_SIZE * d * (tiles.block_rows + 2 * tiles.stages * tiles.block_cols) + 8 * (1 + 3 * tiles.stages)


def _forward(name, rung, file, **kw) -> KernelSpec:
    return KernelSpec(name, rung, "forward", file, f"flash2_{name}_fwd", **kw)


FORWARD = {
    "v1": _forward("v1", 1, "01_flash2_readable.cu", dtypes=ALL, tensor_cores=False, default_tiles=_readable_tiles,
                   defines_of=_readable_defines,
                   smem_of=_forward_readable_smem),
    "v2": _forward("v2", 2, "02_flash2_tensorcore.cu", dtypes=HALF, tensor_cores=True, default_tiles=_forward_tc_tiles,
                   defines_of=_forward_tc_defines, smem_of=_forward_tc_smem, scale_log2=True),
    "v3": _forward("v3", 3, "03_flash2_lane_offsets.cu", dtypes=HALF, tensor_cores=True,
                   default_tiles=_forward_v3_tiles, defines_of=_forward_tc_defines, smem_of=_forward_tc_smem, scale_log2=True),
    "v4": _forward("v4", 6, "06_flash2_wgmma_tma.cu", dtypes=HALF, tensor_cores=True, default_tiles=_forward_wg_tiles,
                   defines_of=_forward_wg_defines, smem_of=_forward_wg_smem, scale_log2=True, arch="sm_90a",
                   head_dims=(64, 128), tma=True),
}  # fmt: skip
DEFAULT_FORWARD = "v3"  # the default on every GPU, and for every head dim …
HOPPER_FORWARD = "v4"  # … except on sm_90 (H100, H200) at the head dims rung 6 takes

# -- backward -------------------------------------------------------------------------


def _backward_tc_tiles(d: int) -> Tiles:
    """Rung 5 by default: 8 warps of 16 keys (Bc = 128), 64 queries per step."""
    return backward_tiles(warps=8, block_rows=64)


def _backward_tc_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return _mma_defines(d, dtype, tiles) | {"BR": tiles.block_rows}


def _backward_tc_smem(d: int, t: Tiles) -> int:
    """K_j, V_j (Bc rows), two stages of Q_i, dO_i (Br rows), dS_ijᵀ (Bc × (Br + 8)), two stages of L_i, D_i."""
    row = padded_dims(d)[1] + 8
    br, bc = t.block_rows, t.block_cols
    return HALF_SIZE * (2 * bc * row + 4 * br * row + bc * (br + 8)) + F * 4 * br


def _backward_readable_smem(d: int, t: Tiles) -> int:
    """K_j, V_j, dK_j, dV_j (Bc × d), Q_i, dO_i (Br × d), P_ij, dS_ij (Br × Bc), L_i, D_i (Br), float32."""
    br, bc = t.block_rows, t.block_cols
    return F * (4 * bc * d + 2 * br * d + 2 * br * bc + 2 * br)


def _backward_wg_tiles(d: int) -> Tiles:
    """Rung 7: two consumer warpgroups of 64 keys (Bc = 128) and a producer, Br = 64 queries per step, two stages
    (three measured within ±5%, gpu/NOTES.md run 22); at d = 128 the warpgroups split dQ_i's columns (run 24)."""
    return backward_warpgroup_tiles(stages=2, split_dq=d == 128)


def _backward_wg_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    if tiles.split_dq and d != 128:
        raise InputError(
            f"tiles: split_dq needs d = 128 (a warpgroup's half of dQ_i is one 64-column piece), got d={d}"
        )
    return {"HEAD_DIM": d, "STAGES": tiles.stages, "SPLIT_DQ": int(tiles.split_dq), "STORAGE": STORAGE_CODE[dtype]}


def _backward_wg_smem(d: int, t: Tiles) -> int:
    """1024 bytes of alignment, K_j and V_j (Bc rows), the stages of Q_i and dO_i (Br rows), dS_ij per consumer
    warpgroup (Br × 64), L_i and D_i per consumer warpgroup (Br floats each), the mbarriers."""
    br, bc, consumers = t.block_rows, t.block_cols, t.warps // 4 - 1
    tiles = HALF_SIZE * (2 * bc * d + 2 * t.stages * br * d + consumers * br * 64)
    return 1024 + tiles + F * 2 * consumers * br + 8 * (1 + 2 * t.stages)


def _backward(name, rung, file, **kw) -> KernelSpec:
    return KernelSpec(name, rung, "backward", file, f"flash2_{name}_bwd", **kw)


BACKWARD = {
    "v1": _backward("v1", 4, "04_flash2_backward_readable.cu", dtypes=ALL, tensor_cores=False,
                    default_tiles=_readable_tiles, defines_of=_readable_defines,
                    smem_of=_backward_readable_smem),
    "v2": _backward("v2", 5, "05_flash2_backward_tensorcore.cu", dtypes=HALF, tensor_cores=True,
                    default_tiles=_backward_tc_tiles, defines_of=_backward_tc_defines, smem_of=_backward_tc_smem),
    "wgmma": _backward("wgmma", 7, "07_flash2_backward_wgmma.cu", dtypes=HALF, tensor_cores=True,
                       default_tiles=_backward_wg_tiles, defines_of=_backward_wg_defines, smem_of=_backward_wg_smem,
                       arch="sm_90a", head_dims=(64, 128), tma=True),
}  # fmt: skip
DEFAULT_BACKWARD = "v2"  # the default on every GPU, and for every head dim …
HOPPER_BACKWARD = "wgmma"  # … except on sm_90 at the head dims where rung 7 measured faster than rung 5
HOPPER_BACKWARD_DIMS = (128,)  # d = 128: +23 … +40% over rung 5; d = 64: slower at every N (gpu/NOTES.md runs 23, 24)

# -- helpers: the standard baseline's row kernels, the backward's element-wise passes ---------------------------

SOFTMAX_THREADS = 256


def _helper(name, file, function, dtypes, defines) -> KernelSpec:
    return KernelSpec(name, None, "helper", file, function, dtypes, False, None, defines, lambda d, t: 0)


def _passes_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    """`d` here is the row length in device memory; 16-byte loads when a row is whole 16-byte pieces."""
    size = {"float32": F, "float16": 2, "bfloat16": 2}[dtype]
    return {"HEAD_DIM": d, "STORAGE": STORAGE_CODE[dtype], "WIDE": int(d * size % 16 == 0)}


def _rows_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    return {"STORAGE": STORAGE_CODE[dtype], "NTHREADS": SOFTMAX_THREADS}


def _probe_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    """d = 64 runs wgmma n128 for S and n64 for O, d = 128 the other way round: the probe covers all four."""
    return {"HEAD_DIM": d, "BC": 192 - d, "STORAGE": STORAGE_CODE[dtype]}


HELPERS = {
    "hopper_probe": KernelSpec("hopper_probe", None, "helper", "hopper_probe.cu", "hopper_probe", HALF, False, None,
                               _probe_defines, lambda d, t: 1024 + HALF_SIZE * d * (64 + 2 * (192 - d)) + 8,
                               arch="sm_90a", head_dims=(64, 128), tma=True),
    "softmax": _helper("softmax", "softmax_rows.cu", "softmax_rows", HALF, _rows_defines),
    "softmax_backward": _helper("softmax_backward", "softmax_backward_rows.cu", "softmax_backward_rows", HALF, _rows_defines),
    "bwd_prepass": _helper("bwd_prepass", "backward_passes.cu", "flash2_bwd_prepass", ALL, _passes_defines),
    "bwd_dq": _helper("bwd_dq", "backward_passes.cu", "flash2_bwd_dq", ALL, _passes_defines),
}  # fmt: skip

LADDER = {spec.rung: spec for spec in (*FORWARD.values(), *BACKWARD.values())}
ALL_SPECS = (*FORWARD.values(), *BACKWARD.values(), *HELPERS.values())


def forward(name: str | None, d: int | None = None, cc: str | None = None) -> KernelSpec:
    """The forward kernel `name` ("v1" … "v4"), or InputError naming the choices. None: the default for head dim d
    on a device of compute capability cc (rung 6 where it fits, else rung 3); without d and cc, rung 3."""
    if name is None:
        fast = FORWARD[HOPPER_FORWARD]
        name = HOPPER_FORWARD if d is not None and cc is not None and fast.fits(d, cc) is None else DEFAULT_FORWARD
    return _pick("kernel", FORWARD, name)


def backward(name: str | int | None, d: int | None = None, cc: str | None = None) -> KernelSpec:
    """The backward kernel `name` ("v1", "v2", "wgmma", or its rung number 4, 5, 7), or InputError naming the
    choices. None: the default for head dim d on a device of compute capability cc (rung 7 on sm_90 at the head
    dims in HOPPER_BACKWARD_DIMS, else rung 5); without d and cc, rung 5."""
    if isinstance(name, int) and not isinstance(name, bool):
        spec = rung(name)
        if spec.direction != "backward":
            raise InputError(f"kernel: rung {name} is a forward kernel; the backward rungs are 4, 5 and 7")
        return spec
    if name is None:
        fast = BACKWARD[HOPPER_BACKWARD]
        picked = d in HOPPER_BACKWARD_DIMS and cc is not None and fast.fits(d, cc) is None
        name = HOPPER_BACKWARD if picked else DEFAULT_BACKWARD
    return _pick("kernel", BACKWARD, name)


def rung(number: int) -> KernelSpec:
    """Rung `number` of the ladder, or InputError naming the rungs."""
    if number not in LADDER:
        raise InputError(f"kernel: expected a rung number among {', '.join(map(str, sorted(LADDER)))}, got {number!r}")
    return LADDER[number]


def _pick(arg: str, table: dict[str, KernelSpec], name) -> KernelSpec:
    if name not in table:
        raise InputError(f"{arg}: expected one of {', '.join(table)}, got {name!r}")
    return table[name]
