"""The gradients' verdict (`sim.api.gradient_tolerance`): every correct backward of the library's listings lies within
its bound, for every dtype, causal or not, ragged shapes and the variants `run --backward` takes; a wrong gradient
(a lost τ, a lost 1/ℓ, dK for dV, a wrong mask) lies outside. The reference is the float64 chain rule, and the
broken gradients are built here, by handing the listings wrong arguments or swapping their outputs."""

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import registry
from sim.api import gradient_tolerance, reference
from sim.api.inputs import random_inputs
from sim.cli import app
from sim.lab import report
from tests.cli_runner import flashsim

ALGORITHMS = ("standard", "flash1", "flash2")
DTYPES = ("fp32", "fp16", "bf16")


def forward_and_backward(algo, dtype, causal, n, nk, d, heads=2, seed=0, **blocks):
    """A run, its forward check, a seeded dO and the backward of the run (`sim.backward(result, do)`)."""
    q, k, v = random_inputs(1, heads, n, nk, d, dtype, seed)
    result = sim.run(algo, q, k, v, causal=causal, **blocks)
    forward = report.output_check(result, q, k, v)
    do = np.random.default_rng(seed + 1).standard_normal(q.shape).astype(q.dtype)
    return result, forward, do, sim.backward(result, do)


def verdict(result, forward, do, grads):
    return gradient_tolerance.check(grads, result.q, result.k, result.v, do,
                                    forward_bound=forward["tolerance"]["bound"], forward_block_cols=result.block_cols)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    algo=st.sampled_from(ALGORITHMS), dtype=st.sampled_from(DTYPES), causal=st.booleans(),
    n=st.integers(1, 150), nk=st.integers(1, 150), d=st.sampled_from((3, 8, 24, 64)),
    blocks=st.sampled_from(({}, {"block_rows": 16, "block_cols": 16}, {"block_rows": 8, "block_cols": 32})),
    seed=st.integers(0, 1000),
)  # fmt: skip
def test_every_correct_backward_is_within_its_bound(algo, dtype, causal, n, nk, d, blocks, seed):
    result, forward, do, grads = forward_and_backward(algo, dtype, causal, n, nk, d, seed=seed, **blocks)
    assert forward["tolerance"]["within"]
    out = verdict(result, forward, do, grads)
    assert out["tolerance"]["within"], (out["max_abs_err"], out["tolerance"]["bound"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "variant",
    [dict(kv_heads=2), dict(kv_heads=1, pack_gqa=True, causal=True), dict(window=(20, 3)), dict(alibi=True),
     dict(softcap=5.0), dict(softcap=30.0, alibi=True, window=(40, 0), kv_heads=2, pack_gqa=True),
     dict(seqlens=(70, 13, 40), causal=True), dict(seqlens=(50, 9), kv_heads=2, softcap=10.0)],
)  # fmt: skip
def test_the_variants_run_backward_takes_are_within_their_bounds(dtype, variant):
    out = json.loads(invoke("--n", 90, "--d", 24, "--heads", 4, "--dtype", dtype, "--json",
                            *variant_args(variant)).stdout)  # fmt: skip
    b = out["backward"]
    assert out["tolerance"]["within"] and b["tolerance"]["within"], b


def variant_args(variant: dict) -> list:
    args = []
    for name, value in variant.items():
        option = "--" + name.replace("_", "-")
        if value is True:
            args.append(option)
        else:
            args += [option, ",".join(map(str, value)) if isinstance(value, tuple) else value]
    return args


def invoke(*args, code=0):
    args = [str(a) for a in args]
    if "--seqlens" in args:  # it sets N itself
        i = args.index("--n")
        del args[i : i + 2]
    out = CliRunner().invoke(app, ["run", "--backward", *args])
    assert out.exit_code == code, out.output
    return out


def broken(algo, causal, how, dtype="fp16", n=70, nk=90, d=16):
    """A backward gone wrong in one way, on a correct forward: its verdict."""
    result, forward, do, grads = forward_and_backward(algo, dtype, causal, n, nk, d)
    q, k, v, o, saved = result.q, result.k, result.v, result.output, dict(result.saved)
    options = dict(causal=causal, scale=result.scale, block_rows=grads.block_rows, block_cols=grads.block_cols)
    if how == "dK for dV":
        grads = dataclasses.replace(grads, dk=grads.dv, dv=grads.dk)
    elif how == "no τ":  # S = Q Kᵀ, dQ = dS K, dK = dSᵀ Q without the scale
        grads = sim.backward(algo, q, k, v, o, saved, do, **options | {"scale": 1.0})
    elif how == "no 1/ℓ":  # P rebuilt as exp(S − m), its normalization lost
        s = result.scale * q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)
        if causal:
            s = np.where(np.arange(nk)[None, :] <= np.arange(n)[:, None] + nk - n, s, -np.inf)
        m = s.max(axis=-1)
        if algo == "flash1":
            saved = {"ℓ": np.ones_like(saved["ℓ"]), "m": m}
        elif algo == "flash2":
            saved = {"L": m}
        else:
            saved = {"P": np.exp(s - m[..., None]).astype(q.dtype)}
        grads = sim.backward(algo, q, k, v, o, saved, do, **options)
    elif how == "wrong mask":  # the backward's mask is not the forward's (standard attention: P of the other mask)
        if algo == "standard":  # its listing applies no mask: P carries it
            saved = sim.run(algo, q, k, v, causal=not causal).saved
        wrong = sim.backward(algo, q, k, v, o, saved, do, **options | {"causal": not causal and algo != "standard"})
        grads = dataclasses.replace(wrong, causal=causal)  # as the run's own backward would claim
    return verdict(result, forward, do, grads)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # without τ, fp16 scores overflow
@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("how", ["dK for dV", "no τ", "no 1/ℓ", "wrong mask"])
def test_a_wrong_backward_is_outside_its_bound(algo, causal, how):
    out = broken(algo, causal, how)
    assert not out["tolerance"]["within"], (out["max_abs_err"], out["tolerance"]["bound"])


def test_run_backward_json_and_table_carry_each_gradients_verdict():
    out = json.loads(invoke("--algo", "flash1", "--n", 77, "--d", 24, "--causal", "--dtype", "bf16", "--json").stdout)
    b = out["backward"]
    assert set(b["max_abs_err"]) == set(b["tolerance"]["bound"]) == set(b["tolerance"]["each"]) == {"dq", "dk", "dv"}
    assert b["tolerance"]["within"] is True and all(b["tolerance"]["each"].values())
    assert all(b["max_abs_err"][g] <= b["tolerance"]["bound"][g] for g in ("dq", "dk", "dv"))
    table = invoke("--algo", "flash2", "--n", 64, "--d", 8).output
    assert table.count("✓ within fp16 tolerance") == 4 and "gradient tolerance:" in table


def test_a_wrong_backward_listing_gets_a_cross_and_exit_code_1(monkeypatch):
    """flash2's backward with dK and dV written to each other's tensors: ✗ on both, exit code 1."""
    listing = registry.REGISTRY["flash2"].backward

    def swapped(chip, **options):
        listing(chip, **options)
        dK, dV = chip.hbm.tensors["dK"], chip.hbm.tensors["dV"]
        dK[...], dV[...] = dV.copy(), dK.copy()

    monkeypatch.setitem(registry.REGISTRY, "flash2", dataclasses.replace(registry.REGISTRY["flash2"], backward=swapped))
    out = invoke("--algo", "flash2", "--n", 64, "--d", 8, code=1).output
    assert out.count("✗ outside fp16 tolerance") == 2 and out.count("✓ within fp16 tolerance") == 2  # O and dQ


def test_the_bound_scales_with_do_as_the_gradients_do(monkeypatch):
    """Gradients are linear in dO: dO·2^k (exact) multiplies each error and each bound by 2^k exactly (the bound's
    absolute term for stores below the normal range, TINY, set aside)."""
    monkeypatch.setattr(gradient_tolerance, "TINY", dict.fromkeys(("fp16", "bf16", "fp32"), 0.0))
    result, forward, do, grads = forward_and_backward("flash2", "fp16", True, 50, 60, 16)
    one = verdict(result, forward, do, grads)
    do8 = (do.astype(np.float64) * 8).astype(do.dtype)
    eight = verdict(result, forward, do8, sim.backward(result, do8))
    for g in ("dq", "dk", "dv"):
        assert eight["tolerance"]["bound"][g] == pytest.approx(8 * one["tolerance"]["bound"][g], rel=1e-12)
        assert eight["max_abs_err"][g] == pytest.approx(8 * one["max_abs_err"][g], rel=1e-12)


def test_no_bound_is_stated_without_the_forwards():
    result, _, do, grads = forward_and_backward("flash2", "fp16", False, 20, 20, 8)
    out = gradient_tolerance.check(grads, result.q, result.k, result.v, do, forward_bound=None,
                                   forward_block_cols=result.block_cols)  # fmt: skip
    assert out["tolerance"] is None and set(out["max_abs_err"]) == {"dq", "dk", "dv"}


@settings(max_examples=40, deadline=None)
@given(
    algo=st.sampled_from(ALGORITHMS), dtype=st.sampled_from(DTYPES), causal=st.booleans(),
    scale=st.sampled_from((-1.0, -0.3, 1e-6, 1e-5, 3e4, 1e8)), n=st.integers(1, 40), d=st.sampled_from((3, 5, 16)),
)  # fmt: skip
def test_a_correct_backward_at_any_score_scale_is_within_its_bound_or_has_none(algo, dtype, causal, scale, n, d):
    """Red team 87: a negative τ made the magnitudes 0 (bounds ≤ 0: ✗ on correct fp32 gradients), τ = 1e-6 left fp16
    gradients below its normal range, where a store rounds by 2⁻²⁵ absolutely (✗), and τ = 1e8 raised OverflowError
    in e^(E_P). Now each is within its bound, or no bound is stated (e^(E_P) past float64): never a cross."""
    q, k, v = random_inputs(1, 1, n, n, d, dtype, 3)
    with np.errstate(over="ignore", invalid="ignore"):  # standard's S past fp16 at 3·10⁴: ±inf, then NaN, as stored
        result = sim.run(algo, q, k, v, causal=causal, scale=scale)
        forward = report.output_check(result, q, k, v)
        do = np.random.default_rng(4).standard_normal(q.shape).astype(q.dtype)
        out = verdict(result, forward, do, sim.backward(result, do))
    assert out["tolerance"] is None or out["tolerance"]["within"], out
    if abs(scale) <= 1:
        assert out["tolerance"] is not None


def test_standard_attention_whose_s_passes_fp16_is_compared_without_a_verdict(recwarn):
    """τ = 3·10⁴ puts S past fp16's 65504: standard attention stores it as ±inf and its output is NaN-ridden, which
    no bound covers; it was '✓ within (≤ 6.2)' beside an error of 2.55 and two RuntimeWarnings (red team 87)."""
    q, k, _ = random_inputs(1, 1, 17, 17, 5, "fp16", 0)
    s_max = float(np.abs(q[0, 0].astype(np.float64) @ k[0, 0].astype(np.float64).T).max()) * 3e4
    assert s_max > 65504  # the case: the definition's scores themselves pass fp16's range
    out = json.loads(flashsim("run", "--algo", "standard", "--scale", 3e4, "--n", 17, "--d", 5, "--json").stdout)
    assert out["tolerance"]["bound"] == "Infinity" and out["tolerance"]["formula"] == "no bound: S past fp16's range"
    assert out["tolerance"]["within"] is None  # no bound, no verdict, as the variants' JSON says (red team 95: true)
    table = flashsim("run", "--algo", "standard", "--scale", 3e4, "--n", 17, "--d", 5, "--backward").stdout
    assert "vs float64 (no bound: S past fp16's range)" in table and "✓" not in table and "✗" not in table
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("args", [
    ("--n", 16, "--d", 4, "--heads", 4, "--kv-heads", 1, "--scale", 1e-6),  # g = 4 heads' dK_h stored: 4 TINY
    ("--n", 16, "--d", 4, "--heads", 8, "--kv-heads", 1, "--scale", 1e-40, "--dtype", "bf16"),
    ("--n", 16, "--d", 4, "--dtype", "fp32", "--scale", 1e-42),  # τ below float32's normal range: no bound
    ("--algo", "standard", "--n", 16, "--d", 4, "--dtype", "fp32", "--scale", 1e-41),
    ("--n", 16, "--d", 4, "--dtype", "fp32", "--scale", 1e-42, "--window", "2,3"),
])  # fmt: skip
def test_correct_gradients_at_the_dtypes_edges_get_no_cross(args):
    """Red team 90: GQA's per-head schedule stores each of its g heads' dK_h (g roundings below the normal range,
    the bound had one), and τ below float32's normal range underflows the chip's own arithmetic (✗, exit 1)."""
    out = flashsim("run", *args, "--backward").stdout
    assert "✗" not in out and "OUTSIDE" not in out, out


def test_a_variant_run_without_a_bound_says_so_and_trace_backward_follows_the_simulated_forward(recwarn):
    """Red team 92: a GQA run whose S passes fp16 said 'within no bound' ("within": true); trace --backward at
    |τ| = 10²⁰ showed P = inf and dQ = NaN under RuntimeWarnings (it took the float64 reference's L)."""
    args = ("run", "--algo", "standard", "--n", 64, "--d", 16, "--scale", 1e4, "--heads", 2, "--kv-heads", 1)
    out = json.loads(flashsim(*args, "--json").stdout)
    assert out["tolerance"] == {"formula": "no bound: S past fp16's range", "bound": "Infinity", "within": None}
    assert "vs float64: no bound" in flashsim(*args).stdout
    shown = flashsim("trace", "--n", 8, "--d", 2, "--backward", "--scale", 1e20).stdout
    assert "nan" not in shown.lower() and " inf" not in shown
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_an_output_holding_nan_is_outside_every_bound():
    """Red team 95, from reading: max(0.0, nan) is 0.0 in Python, so the check dropped a NaN block's error."""
    q, k, v = random_inputs(1, 1, 40, 40, 4, "fp32", 0)
    result = sim.run("flash2", q, k, v, block_rows=8, block_cols=8)
    result.output[0, 0, 17, 2] = np.nan  # one element of the second block of rows
    check = report.output_check(result, q, k, v)
    assert np.isnan(check["max_abs_err"]) and check["tolerance"]["within"] is False


def test_standard_attention_s_stores_below_fp16_s_normal_range_are_in_the_bound():
    """Helper 114: N = 1 against 20,000 keys makes every P and dS entry subnormal in fp16, each store off by up to
    2⁻²⁵ absolutely where the bound had allowed u relative: dK outside (✗, exit 1) on a correct run. An
    implementation exact but for its fp16 stores of P, dP, dS and the gradients (float64 here) lies within the
    bound, and so does the simulator."""
    q, k, v = random_inputs(1, 1, 1, 20000, 1, "fp16", 116)  # `run --algo standard --n 1 --nk 20000 --d 1 --seed 116`
    do = np.random.default_rng(117).standard_normal(q.shape).astype(q.dtype)
    result = sim.run("standard", q, k, v, scale=2.0)
    check = verdict(result, report.output_check(result, q, k, v), do, sim.backward(result, do))
    Q, K, V, dO = (x[0, 0].astype(np.float64) for x in (q, k, v, do))
    fp16 = lambda x: x.astype(np.float16).astype(np.float64)  # noqa: E731
    S = 2.0 * Q @ K.T
    P = np.exp(S - S.max()) / np.exp(S - S.max()).sum()
    dP = dO @ V.T
    dS = P * (dP - (P * dP).sum())
    P_, dP_ = fp16(P), fp16(dP)
    dS_ = fp16(P_ * (dP_ - (P_ * dP_).sum()))
    exact = {"dq": 2.0 * dS @ K, "dk": 2.0 * dS.T @ Q, "dv": P.T @ dO}
    stored = {"dq": fp16(2.0 * dS_ @ K), "dk": fp16(2.0 * dS_.T @ Q), "dv": fp16(P_.T @ dO)}
    assert (np.abs(dS) < 2.0**-14).all()
    for name in ("dq", "dk", "dv"):
        assert np.abs(stored[name] - exact[name]).max() <= check["tolerance"]["bound"][name], name
    assert check["tolerance"]["within"] is True
    assert flashsim("run", "--algo", "standard", "--n", 1, "--nk", 20000, "--d", 1, "--seed", 116, "--scale", 2,
                    "--backward").exit_code == 0  # fmt: skip


def test_a_gradient_past_fp16_s_range_stored_as_inf_is_as_rounding_makes_it():
    """Helper 114: two fp16 keys tied at d = 1 keep P at ½ each at any τ, and at τ = 5000 their exact |dK| is 75,178,
    which fp16 holds only as ±inf (from 65,520 a store rounds there): the run's ±inf were a ✗ on a correct run. Such
    entries are counted apart; an inf where the exact gradient is finite and small stays outside."""
    out = flashsim("run", "--n", 2048, "--d", 1, "--seed", 69, "--scale", 5000, "--backward", "--json")
    b = json.loads(out.stdout)["backward"]
    assert out.exit_code == 0 and b["tolerance"]["within"] is True and b["past_range"] == {"dk": 2}
    q, k, v = random_inputs(1, 1, 2048, 2048, 1, "fp16", 69)
    do = np.random.default_rng(70).standard_normal(q.shape).astype(q.dtype)
    _, dk, _ = reference.attention_backward(*(x.astype(np.float64) for x in (q, k, v, do)), scale=5000.0)
    assert int((np.abs(dk) >= 65520).sum()) == 2  # the float64 reference's own
    shown = " ".join(flashsim("run", "--n", 2048, "--d", 1, "--seed", 69, "--scale", 5000, "--backward").stdout.split())
    assert "2 past fp16's range stored as ±inf" in shown
    result, forward, do, grads = forward_and_backward("flash2", "fp16", False, 64, 64, 8)
    wrong = dataclasses.replace(grads, dk=grads.dk.copy())
    wrong.dk[0, 0, 3, 1] = np.inf
    assert verdict(result, forward, do, wrong)["tolerance"]["each"] == {"dq": True, "dk": False, "dv": True}


def test_no_verdict_where_the_bound_would_pass_any_output_and_the_run_says_why():
    """Helper 114: at --scale 1e36 the forward was ✓ against 4.80, about 2·max|V|, which any mix of V's rows meets,
    right or wrong; the gradients then had no bound and did not say why."""
    out = json.loads(flashsim("run", "--n", 16, "--d", 4, "--scale", 1e36, "--backward", "--json").stdout)
    assert out["tolerance"]["within"] is None and out["tolerance"]["formula"].startswith("no bound: at score scale")
    assert out["backward"]["tolerance"] is None and out["backward"]["no_bound"] == "the forward has none"
    shown = flashsim("run", "--n", 16, "--d", 4, "--scale", 1e36, "--backward").stdout
    assert "gradients: no bound stated: the forward has none" in shown and "✓" not in shown
