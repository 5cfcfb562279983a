"""Each kernel's tiling (Br, Bc, warps) and the `#define`s its launcher injects; pure Python, no CuPy."""

from dataclasses import dataclass, replace

KERNEL_FILES = {
    "v1": "flash2_v1_readable.cu",
    "v2": "flash2_v2_tensorcore.cu",
    "softmax": "softmax_rows.cu",
}
KERNEL_FUNCTIONS = {"v1": "flash2_v1_fwd", "v2": "flash2_v2_fwd", "softmax": "softmax_rows"}
DEFAULT_KERNEL = "v2"
FLASH_KERNELS = ("v1", "v2")
DTYPES = {"v1": ("float32", "float16", "bfloat16"), "v2": ("float16", "bfloat16"), "softmax": ("float16", "bfloat16")}
STORAGE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
MAX_HEAD_DIM = 128


def pad_to(x: int, multiple: int) -> int:
    """x rounded up to a multiple of `multiple`."""
    return -(-x // multiple) * multiple


@dataclass(frozen=True)
class Tiles:
    """One launch geometry: Br query rows and Bc key rows per block, and how the warps split Br."""

    block_rows: int
    block_cols: int
    warps: int
    m_tiles: int = 1  # v2: 16-row MMA tiles per warp (Br = 16 · m_tiles · warps)
    q_in_regs: bool = True  # v2: Q_i's MMA fragments stay in registers for the whole K/V loop
    min_blocks: int = 1  # v2: thread blocks per SM that the register allocation must leave room for
    swizzle: bool = False  # v2: XOR-swizzled shared-memory rows instead of rows padded by 16 bytes

    @property
    def threads(self) -> int:
        return 32 * self.warps


def v2_tiles(
    warps: int, m_tiles: int, block_cols: int, q_in_regs: bool = True, min_blocks: int = 1, swizzle: bool = False
) -> Tiles:
    """A v2 geometry; Br follows from the warp split (16 · m_tiles rows per warp)."""
    return Tiles(16 * m_tiles * warps, block_cols, warps, m_tiles, q_in_regs, min_blocks, swizzle)


def default_tiles(kernel: str, d: int) -> Tiles:
    """The tiling a kernel uses for head dim `d` (measurements behind each choice: gpu/NOTES.md)."""
    if kernel == "v1":
        return Tiles(block_rows=32, block_cols=32, warps=4)
    if kernel == "v2":
        if padded_dims(d)[1] <= 64:
            return v2_tiles(warps=4, m_tiles=2, block_cols=64, min_blocks=2)
        return v2_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2)
    raise KeyError(kernel)


def padded_dims(d: int) -> tuple[int, int]:
    """(row length in device memory, MMA width): d padded to 8 (16-byte rows) and to 16 (MMA k)."""
    return pad_to(d, 8), pad_to(d, 16)


def defines(kernel: str, d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    """The `#define`s the launcher prepends to the kernel's source."""
    if kernel == "softmax":
        return {"STORAGE": STORAGE_CODE[dtype], "NTHREADS": 256}
    tiles = tiles or default_tiles(kernel, d)
    if kernel == "v1":
        return {
            "HEAD_DIM": d,
            "BR": tiles.block_rows,
            "BC": tiles.block_cols,
            "NTHREADS": tiles.threads,
            "STORAGE": STORAGE_CODE[dtype],
        }
    row, d_mma = padded_dims(d)
    return {
        "HEAD_DIM": row,
        "D_MMA": d_mma,
        "NWARPS": tiles.warps,
        "M_TILES": tiles.m_tiles,
        "BC": tiles.block_cols,
        "Q_IN_REGS": int(tiles.q_in_regs),
        "MIN_BLOCKS": tiles.min_blocks,
        "SWIZZLE": int(tiles.swizzle),
        "IS_BF16": int(dtype == "bfloat16"),
    }


def smem_bytes(kernel: str, d: int, tiles: Tiles | None = None) -> int:
    """Dynamic shared memory one thread block of `kernel` allocates."""
    tiles = tiles or default_tiles(kernel, d)
    if kernel == "v1":
        br, bc = tiles.block_rows, tiles.block_cols
        return 4 * (2 * br * d + 2 * bc * d + br * bc + 3 * br)
    _, d_mma = padded_dims(d)
    row = pad_to(d_mma, 64) if tiles.swizzle else d_mma + 8
    return 2 * (tiles.block_rows + 4 * tiles.block_cols) * row


def with_defaults(kernel: str, d: int, **changes) -> Tiles:
    """The default tiling with some fields changed (the harness's variants)."""
    return replace(default_tiles(kernel, d), **changes)
