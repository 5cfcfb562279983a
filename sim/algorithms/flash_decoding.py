"""Flash-Decoding (Dao, Haziza, Massa and Sizov, 2023): split the K/V cache so that decoding fills the GPU.

At decode time Q has a few rows (one new token, or a few) and K/V are long. FlashAttention-2
gives each (batch, head) one thread block, which at batch 1 leaves most SMs idle. Flash-
Decoding splits the keys into P chunks, one thread block each:
  kernel 1  each chunk p runs the FlashAttention-2 forward of Q against its keys and writes
            a partial output O_p and its log-sum-exp lse_p (float32) to HBM;
  kernel 2  the combine: lse_max = max_p lse_p, LSE = log Σ_p exp(lse_p − lse_max) + lse_max,
            O = Σ_p exp(lse_p − LSE)·O_p — exact, by the merge ⊕ of `sim.algorithms.softmax`.
`sim.machine.occupancy` models how many SMs each choice keeps busy, and what that costs in time; the
closed form is `sim.machine.iomodel.decoding`, the SRAM footprint and block search `sim.machine.blocks.decoding_*`.
"""

import numpy as np

from sim.algorithms.scores import Scores, plain
from sim.algorithms.softmax import SoftmaxState, normalize
from sim.core.dtypes import ACCUMULATOR
from sim.machine.blocks import chunks
from sim.machine.memory import Chip


def split_kv(
    chip: Chip, *, Bc: int, splits: int, scale: float, causal: bool, scores: Scores | None = None
) -> None:  # fmt: skip
    """Kernel 1: read Q and chunk p of K, V; write O_p (rows p·Nq … of O_parts) and lse_p (row p of lse_parts).

    With one split this is FlashAttention-2's forward: it writes O and L, and no combine follows. `scores`: a
    window, ALiBi, a softcap, or GQA's packed query rows (`sim.algorithms.scores`; None: the causal mask alone).
    """
    Q = chip.hbm.tensors["Q"]
    Nq, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    scores = scores or plain(Nq, Nk, causal)
    alloc_outputs(chip, splits)

    for p, (k0, k1) in enumerate(chunks(Nk, splits)):  # one thread block per chunk, all at once on the GPU
        with chip.step("load", None, "Load Q from HBM to on-chip SRAM (every split reads it)", i=p, phase="split"):
            Q_p = chip.load("Q", "Q")  # (Nq, d) SRAM
        with chip.step("init", None, "On chip, initialize O_p = 0, ℓ = 0, m = −∞", i=p, phase="split"):
            O_p = chip.put("O_p", np.zeros((Nq, d)))  # (Nq, d) SRAM accumulator
            empty = SoftmaxState.empty(Nq, ACCUMULATOR)  # the identity of ⊕
            ℓ = chip.put("ℓ", empty.ℓ)  # (Nq,) SRAM
            m = chip.put("m", empty.m)  # (Nq,) SRAM
        for j, c0 in enumerate(range(k0, k1, Bc)):  # FlashAttention-2's inner loop over this chunk's keys
            cols = (c0, min(c0 + Bc, k1))
            with chip.step("load", None, "Load K_j, V_j of the chunk from HBM to on-chip SRAM", p, j, phase="split"):
                K_j = chip.load("K_j", "K", cols)  # (Bc, d) SRAM
                V_j = chip.load("V_j", "V", cols)  # (Bc, d) SRAM
            m, ℓ, O_p = attend(chip, Q_p, K_j, V_j, (m, ℓ, O_p), scale, scores, cols, p, j)
        finish(chip, splits, p, m, ℓ, O_p)


def alloc_outputs(chip: Chip, splits: int) -> None:
    """O and L (one split), or the float32 partials O_p and lse_p of every split."""
    Q = chip.hbm.tensors["Q"]
    Nq, d = Q.shape
    if splits == 1:
        chip.hbm.alloc("O", (Nq, d), Q.dtype)
        chip.hbm.alloc("L", (Nq,), np.float32)
    else:
        chip.hbm.alloc("O_parts", (splits * Nq, d), np.float32)
        chip.hbm.alloc("lse_parts", (splits, Nq), np.float32)


def attend(chip: Chip, Q_p, K_j, V_j, state, scale: float, scores: Scores, cols: tuple[int, int], p: int, j: int):
    """One tile of FlashAttention-2's inner loop on keys `cols`: the online update of (m, ℓ, O_p); K_j, V_j freed."""
    m, ℓ, O_p = state
    Nq = Q_p.shape[0]
    with chip.step(
        "compute", None, "On chip, S = τ Q K_jᵀ; m, P̃ = exp(S − m), ℓ; O_p ← e^(m_old − m)·O_p + P̃ V_j", p, j,
        phase="split",
    ):  # fmt: skip
        S = scale * chip.matmul(Q_p, K_j.T)  # (Nq, Bc)
        chip.elementwise(S.size)  # τ·
        S, _ = scores.apply(chip, S, (0, Nq), cols)
        S = chip.put("S", S)
        new, P̃, α = SoftmaxState(m, ℓ).extend(S, exp=chip.exp)  # FlashAttention-2's online update
        m_new = chip.put("m_new", new.m)  # (Nq,)
        P̃ = chip.put("P̃", P̃, replaces=["S"])  # (Nq, Bc)
        α = chip.put("α", α)  # (Nq,)
        ℓ = chip.put("ℓ", new.ℓ)
        m = chip.put("m", m_new, replaces=["m_new"])
        O_p = chip.put("O_p", α[:, None] * O_p + chip.matmul(P̃, V_j))  # (Nq, d)
        chip.elementwise(3 * P̃.size + 4 * Nq + O_p.size)  # rowmax, S − m, rowsum; max, −, α·ℓ, +; α·O_p
    chip.free("K_j", "V_j", "P̃", "α")
    return m, ℓ, O_p


def finish(chip: Chip, splits: int, p: int, m, ℓ, O_p) -> None:
    """The end of split p: O_p = diag(ℓ)⁻¹ O_p and lse_p written (as O and L with one split); its buffers freed."""
    Nq = O_p.shape[0]
    with chip.step("compute", None, "On chip, O_p = diag(ℓ)⁻¹ O_p, lse_p = m + log ℓ", i=p, phase="split"):
        O_p = chip.put("O_p", normalize(O_p, ℓ))
        lse_p = chip.put("lse_p", SoftmaxState(m, ℓ).lse)  # (Nq,)
        chip.elementwise(O_p.size + 2 * Nq)  # ÷ℓ; log, +
    if splits == 1:
        with chip.step("store", None, "Write O and L = lse_1 to HBM", i=p, phase="split"):
            chip.store("O", O_p)
            chip.store("L", lse_p)
    else:
        with chip.step("store", None, "Write O_p and lse_p to HBM (float32)", i=p, phase="split"):
            chip.store("O_parts", O_p, (p * Nq, (p + 1) * Nq))
            chip.store("lse_parts", lse_p, (p, p + 1))
    chip.free("Q", "O_p", "ℓ", "m", "lse_p")


def combine(chip: Chip, *, splits: int) -> None:
    """Kernel 2: read every lse_p and O_p; write O (storage dtype) and its log-sum-exp L (float32)."""
    Q = chip.hbm.tensors["Q"]
    Nq, d = Q.shape
    chip.hbm.alloc("O", (Nq, d), Q.dtype)
    chip.hbm.alloc("L", (Nq,), np.float32)
    with chip.step("load", None, "Load lse_1 … lse_P from HBM to on-chip SRAM", phase="combine"):
        lse = chip.load("lse_parts", "lse_parts")  # (P, Nq) SRAM
    with chip.step(
        "compute", None, "On chip, lse_max = max_p lse_p, LSE = log Σ_p exp(lse_p − lse_max) + lse_max", phase="combine"
    ):
        merged = SoftmaxState.of(lse, axis=0, exp=chip.exp)  # ⊕ over p of the partials' states (lse_p, 1)
        chip.put("lse_max", merged.m)  # (Nq,), in SRAM while LSE is formed
        LSE = chip.put("LSE", merged.lse)  # (Nq,)
        chip.elementwise(3 * lse.size + 2 * Nq)  # max, −, Σ; log, +
        O = chip.put("O", np.zeros((Nq, d)))  # (Nq, d) SRAM accumulator
    for p in range(splits):
        with chip.step("load", None, "Load O_p from HBM to on-chip SRAM", i=p, phase="combine"):
            O_p = chip.load("O_p", "O_parts", (p * Nq, (p + 1) * Nq))  # (Nq, d) SRAM
        with chip.step("compute", None, "On chip, O ← O + exp(lse_p − LSE)·O_p", i=p, phase="combine"):
            w = chip.exp(lse[p] - np.where(np.isneginf(LSE), np.inf, LSE))  # (Nq,); 0 for a row that sees no key
            O = chip.put("O", O + w[:, None] * O_p)
            chip.elementwise(Nq + 2 * O_p.size)  # −; ·, +
        chip.free("O_p")
    with chip.step("store", None, "Write O and L = LSE to HBM", phase="combine"):
        chip.store("O", O)
        chip.store("L", LSE)
    chip.free("lse_parts", "lse_max", "LSE", "O")


def forward(chip: Chip, *, Bc: int, splits: int, scale: float, causal: bool, scores: Scores | None = None) -> None:
    """Both kernels, one after the other (only the first with one split)."""
    split_kv(chip, Bc=Bc, splits=splits, scale=scale, causal=causal, scores=scores)
    if splits > 1:
        combine(chip, splits=splits)
