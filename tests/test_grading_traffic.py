"""IO scoring: the expectation equals the closed form; the score is linear between its thresholds; the message names the cause."""

import pytest

from sim.algorithms import registry
from sim.grading import traffic


def case(N, Nk, d, dtype, causal, Br, Bc):
    return {"N": N, "Nk": Nk, "d": d, "dtype": dtype, "causal": causal, "Br": Br, "Bc": Bc, "scale": d**-0.5}


@pytest.mark.parametrize("algorithm, backward", [("flash1", False), ("flash2", False), ("flash2", True)])
@pytest.mark.parametrize(
    "shape", [(37, 53, 8, "fp16", False, 8, 16), (53, 37, 8, "bf16", True, 16, 8), (64, 64, 16, "fp32", True, 16, 16)]
)
def test_expected_traffic_adds_up_to_the_closed_form(algorithm, backward, shape):
    c = case(*shape)
    grading = {"algorithm": algorithm, "pass": "backward" if backward else "forward"}
    exp = traffic.expected(grading, c)
    s = {"fp16": 2, "bf16": 2, "fp32": 4}[c["dtype"]]
    form = (registry.backward_counts if backward else registry.counts)(
        algorithm, c["N"], c["Nk"], c["d"], s, c["Br"], c["Bc"], c["causal"]
    )
    assert sum(exp.per_tensor.values()) == exp.optimum == form.hbm_bytes
    if not backward:
        assert exp.per_tensor["K", "read"] == exp.per_tensor["V", "read"]
        # FlashAttention-2 loads no Q block whose last row, (i + 1)·Br − 1 + Nk − N, sees no key (causal, N > Nk)
        blind = c["Br"] * max(0, (c["N"] - c["Nk"]) // c["Br"]) if c["causal"] and algorithm == "flash2" else 0
        assert exp.per_tensor["Q", "read"] == s * (c["N"] - blind) * c["d"] * (
            -(-c["Nk"] // c["Bc"]) if algorithm == "flash1" else 1
        )


def expectation():
    """Algorithm 1 at N = Nk = 64, d = 8, fp16, Br = 16, Bc = 32: K and V read once (1,024 B each)."""
    return traffic.expected({"algorithm": "flash1"}, case(64, 64, 8, "fp16", False, 16, 32))


def booked(exp, **changes):
    out: dict = {}
    for (t, d), n in exp.per_tensor.items():
        out.setdefault(t, {"read": 0, "write": 0})[d] = n
    for key, n in changes.items():
        t, d = key.rsplit("_", 1)
        out.setdefault(t, {"read": 0, "write": 0})[d] = n
    return out


def test_matching_traffic_scores_full_marks():
    exp = expectation()
    v = traffic.score(booked(exp), {}, exp, {"Q", "K", "V"}, 1.0, 1.5)
    assert (v.fraction, v.ratio) == (1.0, 1.0) and v.message.startswith("HBM traffic matches Algorithm 1")


def test_the_score_is_linear_between_the_thresholds():
    exp = expectation()
    extra = exp.optimum // 4  # K read again for a quarter of the optimum: x = 1.25, halfway between 1.0 and 1.5
    v = traffic.score(booked(exp, K_read=exp.per_tensor["K", "read"] + extra), {"K": 1024}, exp, {"K"}, 1.0, 1.5)
    assert v.ratio == pytest.approx(1 + extra / exp.optimum) and v.fraction == pytest.approx((1.5 - v.ratio) / 0.5)
    assert traffic.score(booked(exp, K_read=10**9), {}, exp, {"K"}, 1.0, 1.5).fraction == 0.0


def test_the_message_names_the_tensors_and_how_often_they_were_read():
    exp = expectation()
    v = traffic.score(booked(exp, K_read=32 * 1024, V_read=32 * 1024), {"K": 1024, "V": 1024}, exp, {"K", "V"}, 1.0, 1.5,
                      "check your loop order")  # fmt: skip
    assert v.message.startswith(
        "K and V were read 32 times each where Algorithm 1 reads them once — check your loop order"
    )
    s = traffic.score(booked(exp, S_write=4 * 64 * 64), {"S": 4 * 64 * 64}, exp, {"K"}, 1.0, 1.5, "hint")
    assert s.message.startswith("S was written once where Algorithm 1 never writes it (")
    assert "hint" not in s.message  # the hint is for inputs read too often
