"""gpu.lab.compare_variants' prediction for the backward's main kernel, counted by hand: rung 7 walks, per K/V head
and K/V block j of each sequence, the Q blocks of its g query heads that some row of which sees a key of K_j."""

import pytest

from gpu import registry
from gpu.lab import compare_variants as cv


def by_hand(case: str, d: int, br: int, bc: int = 128) -> dict[str, int]:
    causal, variant = cv.CASES[case]
    hkv = variant.get("kv_heads", cv.HEADS)
    left, right = variant.get("window", [-1, -1])
    right = 0 if causal and (right < 0 or right > 0) else right
    read = reduced = write = 0
    for n, nk in zip(variant.get("seqlens_q", [cv.N]), variant.get("seqlens_k", [cv.N]), strict=True):
        shift = nk - n  # query p's diagonal key is p + shift; its band [p + shift − left, p + shift + right]
        for c0 in range(0, nk, bc):
            c1 = min(c0 + bc, nk) - 1
            read += hkv * 2 * 2 * (c1 - c0 + 1) * d  # K_j, V_j once per K/V head, fp16
            for p0 in range(0, n, br):
                p1 = min(p0 + br, n) - 1
                # rows p0 … p1 see the keys of the union of their bands, which is one interval (bands touch)
                if (left < 0 or p0 + shift - left <= c1) and (right < 0 or p1 + shift + right >= c0):
                    rows = p1 - p0 + 1
                    read += cv.HEADS * (2 * 2 * rows * d + 2 * 4 * rows)  # Q_i, dO_i; L_i, D_i in float32
                    reduced += cv.HEADS * 4 * rows * d  # dQ_i's products added in float32
        write += hkv * 2 * 2 * nk * d * 2  # dK, dV: 4-byte stores, two sectors' worth of L2 writes per 32 bytes
    return {"read": read, "reduced": reduced, "write": write}


@pytest.mark.parametrize("case", cv.CASES)
@pytest.mark.parametrize("d", [64, 128])
def test_rung7_main_kernel_bytes_are_its_visits(case, d):
    spec = registry.rung(7)
    causal, variant = cv.CASES[case]
    assert cv.predicted_backward(spec, d, causal, variant) == by_hand(case, d, spec.default_tiles(d).block_rows)


def test_each_case_names_its_variants_and_rung_7_runs_each_on_an_h100():
    assert {name: cv.kinds(v) for name, (_, v) in cv.CASES.items()} == {
        "plain causal": (), "gqa 8": ("gqa",), "gqa 8 causal": ("gqa",), "window 1024": ("window",),
        "window 1024 both sides": ("window",), "alibi causal": ("alibi",), "softcap": ("softcap",),
        "varlen causal": ("packed",), "varlen gqa window": ("gqa", "window", "packed"),
    }  # fmt: skip
    assert {registry.backward(None, d, "9.0", cv.kinds(v)).rung for _, v in cv.CASES.values() for d in (64, 128)} == {7}
    assert {registry.backward(None, 128, "8.0", cv.kinds(v)).rung for _, v in cv.CASES.values()} == {5}
