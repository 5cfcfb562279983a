"""Triton submissions made from assignment 7's master, each with one thing wrong (an exact edit of its text)."""

import re
from pathlib import Path

from sim.grading import spec

MASTER = spec.locate("07")
Q_LOAD = "    Q_i = tl.load(Q + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)\n"
K_LOAD = "        K_j = tl.load(K + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)  # line 6: (Bc, D)\n"
V_LOAD = "        V_j = tl.load(V + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)\n"
MASKED = '        S_ij = tl.where(seen, S_ij, float("-inf"))\n'
S_TO_HBM = (
    "        S_ptrs = W + rows[:, None] * Nk + keys[None, :]\n"
    "        S_ok = row_ok[:, None] & (keys < Nk)[None, :]\n"
    "        tl.store(S_ptrs, S_ij, mask=S_ok)\n"
    '        S_ij = tl.load(S_ptrs, mask=S_ok, other=float("-inf"))\n'
)
HOST = '''
import ctypes

import numpy as np


def attention_on_the_host(addresses, n, nk, d, tau):
    """Read Q, K, V and write O, L (float32) through their raw addresses."""
    sizes = (n * d, nk * d, nk * d, n * d, n)
    q, k, v, o, lse = (np.ctypeslib.as_array((ctypes.c_float * c).from_address(a)) for a, c in zip(addresses, sizes))
    s = (q.reshape(n, d) @ k.reshape(nk, d).T) * tau
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    o[:] = ((p @ v.reshape(nk, d)) / p.sum(axis=1, keepdims=True)).reshape(-1)
    lse[:] = m[:, 0] + np.log(p.sum(axis=1))


@triton.jit
def flash2_forward(Q, K, V, O, L, W, N, Nk, d, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr):
    """Attention computed on the host, in program 0, through the arguments' raw addresses: no load, no store."""
    if tl.program_id(0).handle.data[0] == 0:
        addresses = [int(t.handle.data[0]) for t in (Q, K, V, O, L)]
        attention_on_the_host(addresses, N.handle.data[0].item(), Nk.handle.data[0].item(), d.handle.data[0].item(), scale)
'''


def shape(result) -> dict[str, int]:
    """N, Nk, d, Br, Bc of a graded test, read from the case it reports."""
    return {k: int(v) for k, v in re.findall(r"\b(N|Nk|d|Br|Bc)=(\d+)", result.case)}


def edit(folder: Path, name: str, old: str, new: str) -> Path:
    """The master with `old` (which must occur once) replaced by `new`, written to folder/name.py."""
    text = MASTER.read_text()
    assert text.count(old) == 1, old
    path = folder / f"{name}.py"
    path.write_text(text.replace(old, new))
    return path


def reloads_q(folder: Path) -> Path:
    """Q_i loaded again for every K/V block, inside the loop."""
    return edit(folder, "reloads_q", K_LOAD, Q_LOAD.replace("    Q_i", "        Q_i") + K_LOAD)


def writes_s(folder: Path) -> Path:
    """Every masked S_ij stored to the scratch W in HBM and read back: S materialized, as standard attention does."""
    return edit(folder, "writes_s", MASKED, MASKED + S_TO_HBM)


def off_by_one(folder: Path) -> Path:
    """The causal mask without its diagonal: c < r + Nk − N."""
    return edit(folder, "off_by_one", "keys[None, :] <= rows[:, None]", "keys[None, :] < rows[:, None]")


def unmasked_k(folder: Path) -> Path:
    """K_j and V_j loaded without the row mask: the last block reads past the end of K."""
    return edit(folder, "unmasked_k", "kv = (keys < Nk)[:, None] & col_ok[None, :]", "kv = col_ok[None, :]")


def whole_rows(folder: Path) -> Path:
    """Four K/V blocks at a time: the same bytes, four times the tiles."""
    path = edit(
        folder, "whole_rows", "keys = start + tl.arange(0, BLOCK_N)", "keys = start + tl.arange(0, 4 * BLOCK_N)"
    )
    path.write_text(path.read_text().replace("range(0, hi, BLOCK_N)", "range(0, hi, 4 * BLOCK_N)"))
    return path


def calls(folder: Path, module: str) -> Path:
    """`module` (numpy, torch) imported and called for the exponential instead of Triton's."""
    path = edit(
        folder, f"calls_{module}", "import triton.language as tl\n", f"import {module}\nimport triton.language as tl\n"
    )
    path.write_text(path.read_text().replace("tl.exp2(S_ij - shift[:, None])", f"{module}.exp2(S_ij - shift[:, None])"))
    return path


def host(folder: Path) -> Path:
    """The master's kernel replaced by one that computes on the host through raw pointers (float32 only)."""
    text = MASTER.read_text()
    path = folder / "host.py"
    path.write_text(text[: text.index("\n@triton.jit\ndef") + 1] + HOST.lstrip())
    return path


def host_int(folder: Path) -> Path:
    """A Python int() of a loop index: the interpreter runs it, no GPU compiler does."""
    return edit(folder, "host_int", "        m_i = m_new\n", "        m_i = m_new\n        start = int(start)\n")


def host_dict(folder: Path) -> Path:
    """A dict of tiles: the interpreter runs it, no GPU compiler does."""
    return edit(folder, "host_dict", "        m_i = m_new\n", '        kept = {"m": m_new}\n        m_i = kept["m"]\n')


def branch_dict(folder: Path) -> Path:
    """`host_dict`'s dict behind a block size no test uses but the old compile check's (BLOCK_M = 64)."""
    new = '        if BLOCK_M != 64:\n            kept = {"m": m_new}\n            m_new = kept["m"]\n        m_i = m_new\n'
    return edit(folder, "branch_dict", "        m_i = m_new\n", new)


def unrolls_dead_branch(folder: Path) -> Path:
    """`host_dict`'s dict after a branch no program takes (i > 2³⁰) that the compiler unrolls 10⁹ times: the
    compile's process outran its CPU limit before reaching the dict, and its killed silence was read as a pass (red
    team 86)."""
    dead = "        if i > 1 << 30:\n            for _ in tl.static_range(1000000000):\n                m_new = m_new\n"
    text = (
        host_dict(folder).read_text().replace('        kept = {"m": m_new}\n', dead + '        kept = {"m": m_new}\n')
    )
    (path := folder / "unrolls_dead_branch.py").write_text(text)
    return path


WALKS = {  # the K/V blocks walked from the last down, the step kept in several ways
    "in the for": ("", "range(top, -1, -BLOCK_N)"),  # a constexpr at the `for`: the compiler counts it down
    "in a local": ("    step = -BLOCK_N\n", "range(top, -1, step)"),  # a tensor: a GPU runs it no time
    "tl.range, in a local": ("    step = -BLOCK_N\n", "tl.range(top, -1, step)"),
    "chosen at run time": ("", "range(top, -1, -BLOCK_N if Nk > 0 else BLOCK_N)"),  # red team 98: arith.select
    "unpacked": ("    top, step = top, -BLOCK_N\n", "range(top, -1, step)"),  # a Python int under the interpreter
    "min of constants": ("", "range(top, -1, min(-BLOCK_N, -1))"),  # a constexpr: the compiler counts it down
    # helper 110: a local the annotation makes a constexpr, as Triton's tutorial writes one; counted down on sm_90
    "in a constexpr local": ("    STEP: tl.constexpr = -BLOCK_N\n", "range(top, -1, STEP)"),
    # helper 112: a module constant made by arithmetic is a constexpr global; the compiler counts it down
    "by a module constant": ("", "range(top, -1, DOWN * BLOCK_N)"),
}
DOWN = "DOWN = tl.constexpr(1 - 2)\n"  # the module constant the walk "by a module constant" reads
COUNTED_DOWN = (
    "in the for",
    "min of constants",
    "in a constexpr local",
    "by a module constant",
)  # the walks a GPU runs as the interpreter does


def walks_down(folder: Path, how: str) -> Path:
    """The master with its K/V blocks walked from the last down (the online softmax does not mind the order), the
    step written as WALKS says (red team 91: a runtime step below zero runs no iteration on an H200)."""
    before, loop = WALKS[how]
    top = "    top = ((hi + BLOCK_N - 1) // BLOCK_N - 1) * BLOCK_N\n"
    name = "walks_down_" + "".join(c if c.isalnum() else "_" for c in how)
    path = edit(folder, name, "    for start in range(0, hi, BLOCK_N):", f"{top}{before}    for start in {loop}:")
    if "DOWN" in loop:
        path.write_text(path.read_text().replace("\nGRADING = {", f"\n{DOWN}\nGRADING = {{", 1))
    return path


def rounds_p(folder: Path) -> Path:
    """P̃_ij rounded to V's dtype before P̃_ij V_j, as the Triton tutorial does: fp16 costs u·max|V| more."""
    return edit(folder, "rounds_p", "tl.dot(S_ij, V_j.to(tl.float32))", "tl.dot(S_ij.to(V_j.dtype), V_j)")


def descriptor_k(folder: Path) -> Path:
    """K_j loaded through a tensor descriptor (TMA on a GPU), V_j through pointers."""
    descriptor = (
        "        K_desc = tl.make_tensor_descriptor(K, shape=[Nk, d], strides=[d, 1], block_shape=[BLOCK_N, BLOCK_D])\n"
        "        K_j = K_desc.load([start, 0])\n"
    )
    return edit(folder, "descriptor_k", K_LOAD, descriptor)


K_TILE, V_TILE = (line.split(" = ", 1)[1].split("  #")[0].strip() for line in (K_LOAD, V_LOAD))
KEEP = '''
@triton.jit
def keep(K_j, V_j, kept=[0, 0]):
    """K_j and V_j kept in the list this function was defined with."""
    kept[0] = K_j
    kept[1] = V_j
    return kept
'''
KEEP_DICT = '''
@triton.jit
def keep(K_j, V_j):
    """K_j and V_j handed back through a dict (the interpreter runs it; no GPU compiler takes a dict)."""
    kept = {"K": K_j, "V": V_j}
    return kept["K"], kept["V"]
'''
HIDING = {  # where: (the statements that keep K_j and V_j there, K_j read back, V_j read back, the file's addition)
    "tuple": ("kept = ({K}, {V})", "kept[0]", "kept[1]", ""),
    "list": ("kept = [{K}, {V}]", "kept[0]", "kept[1]", ""),
    "dict": ('kept = {{"K": {K}, "V": {V}}}', 'kept["K"]', 'kept["V"]', ""),
    "module global": ("KEPT[0] = {K}\n        KEPT[1] = {V}", "KEPT[0]", "KEPT[1]", "\nKEPT = [0, 0]\n"),
    "kernel attribute": ("flash2_forward.T = ({K}, {V})", "flash2_forward.T[0]", "flash2_forward.T[1]", ""),
    "default argument": ("kept = keep({K}, {V})", "kept[0]", "kept[1]", KEEP),
    "a callee's dict": ("kept = keep({K}, {V})", "kept[0]", "kept[1]", KEEP_DICT),
    "no name": ("", K_TILE, V_TILE, ""),
    "int16 bits": ("K_j = {K}.to(tl.int16, bitcast=True)\n        V_j = {V}.to(tl.int16, bitcast=True)",
                   "K_j.to(tl.float16, bitcast=True)", "V_j.to(tl.float16, bitcast=True)", ""),
}  # fmt: skip


HOARD = """    # a hoard of 16 K-sized tiles in ONE array (15 of ones, 1 of zeros), joined level by level
    H = tl.zeros((BLOCK_N, BLOCK_D), K.dtype.element_ty) + 1.0
    Z = tl.zeros((BLOCK_N, BLOCK_D), K.dtype.element_ty)
    H2 = tl.join(H, H)
    T2 = tl.join(H, Z)
    H4 = tl.join(H2, H2)
    T4 = tl.join(H2, T2)
    H8 = tl.join(H4, H4)
    T8 = tl.join(H4, T4)
    HOARD = tl.join(H8, T8)  # (BLOCK_N, BLOCK_D, 2, 2, 2, 2)
    H = 0.0
    Z = 0.0
    H2 = 0.0
    T2 = 0.0
    H4 = 0.0
    T4 = 0.0
    H8 = 0.0
    T8 = 0.0
    # the zero tile as a VIEW of the hoard (tl.split is a NumPy view under the interpreter): passed as `other`, it
    # is "a fill of one value", and Held.measure leaves out every value whose root array is its root: the hoard
    a, v = tl.split(HOARD)
    a, v = tl.split(v)
    a, v = tl.split(v)
    a, ZERO = tl.split(v)
"""
DROP = """    HOARD = 0.0  # dropped before the stores, which pass no `other`
    ZERO = 0.0
    a = 0.0
    v = 0.0
"""


def hoards_behind_other(folder: Path) -> Path:
    """Red team 106: 16 K-sized tiles joined into one array, a zero tile split out of it (a view under the
    interpreter) passed as the K/V loads' `other`, dropped before the stores; the SRAM measure had left out every
    value sharing the `other`'s array, and this scored 100."""
    text = MASTER.read_text()
    for old, new in (
        (Q_LOAD, Q_LOAD + HOARD), (K_LOAD, K_LOAD.replace("other=0.0", "other=ZERO")),
        (V_LOAD, V_LOAD.replace("other=0.0", "other=ZERO")), ("    O_i = O_i / tl.where", DROP + "    O_i = O_i / tl.where"),
    ):  # fmt: skip
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "hoards_behind_other.py"
    path.write_text(text)
    return path


def hides(folder: Path, where: str) -> Path:
    """Four K/V blocks at a time (as whole_rows), kept where no variable of the program shows them as
    floating-point tiles: HIDING[where] (fp16 cases only: "int16 bits" bitcasts)."""
    statement, k, v, addition = HIDING[where]
    text = whole_rows(folder).read_text()
    text = text.replace(K_LOAD + V_LOAD, f"        {statement.format(K=K_TILE, V=V_TILE)}\n" if statement else "")
    text = text.replace("tl.trans(K_j)", f"tl.trans({k})").replace("V_j.to(tl.float32)", f"{v}.to(tl.float32)")
    path = folder / f"hides_in_{where.replace(' ', '_')}.py"
    path.write_text(text + addition)
    return path
