"""The LLM variants' options (`--kv-heads`, `--pack-gqa`, `--window`, `--alibi`, `--softcap`, `--seqlens`,
`--page-size`), defined once, and `flashsim run`'s report of a run that uses them."""

from collections import Counter
from math import ceil

import click
import numpy as np
from rich.table import Table

import sim
from sim.algorithms import iomodel_variants
from sim.api import gradient_tolerance, reference_variants, tolerance
from sim.api.inputs import configure_shape, random_inputs
from sim.cli.options import POSITIVE, Count, FloatRange, console, emit_json, typed
from sim.cli.progress import Work
from sim.core.dtypes import DTYPES, itemsize
from sim.core.errors import InputError
from sim.core.format import count, decimal_bytes
from sim.machine.trace import MAX_SIZE

SOFTCAP_MIN = 2.0**-99  # below, S/c overflows float32 (2¹²⁸) for scores of 2²⁹: NumPy warns, tanh gives ±1 anyway


class Softcap(FloatRange):
    """--softcap's c: at least SOFTCAP_MIN, said as 2⁻⁹⁹ and a decimal that, typed back, is taken."""

    def __init__(self):
        super().__init__(min=SOFTCAP_MIN)

    def _describe_range(self) -> str:
        return "2⁻⁹⁹ ≈ 1.58e-30 or more: a smaller c overflows S/c in float32"


class Ints(click.ParamType):
    """Comma-separated integers, `name` (the metavar --help shows): `--window LEFT,RIGHT`, `--seqlens 100,2000,37`,
    a sweep's `--n 512,1024`; each refused out of `least` … `MAX_SIZE` as a single option's size is (`Count`)."""

    def __init__(self, name: str, what: str, least: int = 1, length: int | None = None):
        self.name, self.what, self.length, self.each = name, what, length, Count(least, MAX_SIZE)

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            numbers = tuple(int(x) for x in str(value).split(","))
        except ValueError:
            numbers = ()
        if not numbers or (self.length and len(numbers) != self.length):
            self.fail(f"{value!r} is not {self.name}: {self.what}", param, ctx)
        return tuple(self.each.convert(x, param, ctx) for x in numbers)


WINDOW = Ints("LEFT,RIGHT", "two integers, −1 (unbounded) or more", least=-1, length=2)
SEQLENS = Ints("N[,N…]", "sequence lengths, such as 100,2000,37")
RUN = (  # flashsim run's and trace's: applied in this order
    click.option("--kv-heads", type=POSITIVE, default=None, help="K/V heads Hkv (GQA/MQA: --heads a multiple of it)."),
    click.option("--pack-gqa", is_flag=True, help="GQA's packed schedule: one program per K/V head (flash2)."),
    click.option("--window", type=WINDOW, default=None, help="Sliding window LEFT,RIGHT, bottom-right (flash2)."),
    click.option("--alibi", is_flag=True, help="ALiBi: −slope·|i + Nk − N − j|, slopes 2^(−8h/H) (flash2)."),
    click.option("--softcap", type=Softcap(), default=None, help="S ← c·tanh(S/c) (flash2)."),
    click.option("--seqlens", type=SEQLENS, default=None, help="A packed batch of these lengths (sets N, batch)."),
)
PAGE_SIZE = click.option("--page-size", type=POSITIVE, default=None, help="Keys per page of a paged K/V cache.")


def run_options(command):
    """`flashsim run`'s variant options."""
    for option in reversed(RUN):
        command = option(command)
    return command


SLOPE_BYTES, PER_SLOPE = 32, 20e-9  # --alibi's slopes per head: float64, with arange's and the power's temporaries
PER_SCORE_VARIANT = 8e-9  # the float64 definition's ALiBi bias or softcap tanh, per score (red team 99: 7.3, 5.3)
BACKWARD_VARIANT = 2.3  # and with the gradients' reference (measured: ×2.1)


def alibi_slopes(heads: int) -> np.ndarray:
    """The ALiBi paper's slopes for H heads: 2^(−8h/H), h = 1 … H."""
    return 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)


def trace(algo, backward, n, nk, d, heads, dtype, seed, row, chip, *, kv_heads, pack_gqa, window, alibi, softcap,
          seqlens):  # fmt: skip
    """What `flashsim trace` records: the first program of `heads` query heads on `kv_heads` K/V heads (of the
    first sequence, with `seqlens`: a packed batch of those lengths), on seeded random inputs."""
    from sim.viewer import traces

    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise InputError(f"kv_heads: {heads} query heads are not a multiple of {kv_heads} K/V heads")
    _packed_backward(algo, seqlens, backward)
    given = dict(window=window, alibi_slopes=alibi_slopes(heads) if alibi else None, softcap=softcap)
    options = chip | {name: value for name, value in given.items() if value is not None} | dict(pack_gqa=pack_gqa)
    if seqlens is not None:
        rng, cu = np.random.default_rng(seed), np.cumsum([0, *seqlens])
        q, k, v = (rng.standard_normal((cu[-1], h, d)).astype(DTYPES[dtype]) for h in (heads, kv_heads, kv_heads))
        record = traces.record_varlen_backward if backward else traces.record_varlen
        recorded = record(algo, q, k, v, cu, row=row, **options)
    else:
        q, k, v = random_inputs(1, heads, n, nk, d, dtype, seed)  # (1, H, ·, d); one head's as (N, d)
        q, k, v = (q[0, 0], k[0, 0], v[0, 0]) if heads == 1 else (q, k[:, :kv_heads], v[:, :kv_heads])
        recorded = (traces.record_backward if backward else traces.record)(algo, q, k, v, row=row, **options)
    return recorded


def given(kv_heads, pack_gqa, window, alibi, softcap, seqlens) -> bool:
    """Whether a run uses any variant (then `report` runs it)."""
    return kv_heads is not None or pack_gqa or window is not None or alibi or softcap is not None or seqlens is not None


def shape(seqlens, n: int, nk, batch: int) -> tuple[int, int | None, int]:
    """(N, Nk, batch) as --seqlens sets them: the longest sequence, and one batch entry per sequence; --n, --nk or
    --batch typed beside --seqlens is refused in one line (it would be ignored)."""
    if seqlens is None:
        return n, nk, batch
    given = typed(click.get_current_context(silent=True))
    dropped = [f"--{name}" for name in ("n", "nk", "batch") if name in given]
    if dropped:
        raise InputError(f"--seqlens: sets N, Nk and the batch itself; drop {' and '.join(dropped)}")
    return max(seqlens), max(seqlens), len(seqlens)


def _packed_backward(algo: str, seqlens, backward: bool) -> None:
    """Refuse standard attention's backward over a packed batch by its option, before anything runs (red teams 95,
    99: the forward ran, then `result: …` named the library's argument)."""
    if seqlens is not None and backward and algo == "standard":
        raise InputError("--algo standard: a packed batch (--seqlens) of standard attention has no backward here "
                         "(it keeps no statistics); use --algo flash1 or flash2, or drop --backward")  # fmt: skip


def row_blocks(algo: str, n: int, heads: int, Br: int, *, kv_heads, pack_gqa, window, alibi, softcap,
               seqlens) -> int:  # fmt: skip
    """The steps `report`'s closed forms take (`iomodel.sums` under a mask Rule: a block, or a run of whole blocks
    inside one position): flash2's packed schedule, always counted beside the per-head one, min(⌈g·N/Br⌉, 2·N + 1)
    per distinct length (and the padded batch's); the per-head schedule's ⌈N/Br⌉ under a window, softcap or ALiBi.
    The others are O(1) in N."""
    g = max(1, heads // (kv_heads or heads))
    flags = window is not None or alibi or softcap is not None
    lengths = set(seqlens) | {n} if seqlens else {n}  # with --seqlens the padded batch is counted too
    walked = 0
    for m in lengths:
        walked += min(ceil(g * m / Br), 2 * m + 1) if algo == "flash2" and (g > 1 or flags) else 0  # packed
        walked += ceil(m / Br) if flags else 0  # the per-head schedule
    return walked


def report(algo, n, nk, d, batch, heads, dtype, chip, seed, counts_only, backward, as_json, *, kv_heads, pack_gqa,
           window, alibi, softcap, seqlens, quiet=False) -> int:  # fmt: skip
    """Run (or count) a variant, check it against the float64 definition, print the table or JSON; exit code 1
    when the output is outside `sim.api.tolerance`'s bound, or a gradient outside `sim.api.gradient_tolerance`'s."""
    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise InputError(f"kv_heads: {heads} query heads are not a multiple of {kv_heads} K/V heads")
    _packed_backward(algo, seqlens, backward)
    if counts_only and backward:  # (it printed the forward's closed form alone, the backward dropped unsaid)
        raise InputError("--backward: not with --counts-only and a variant (no closed form counts that backward "
                         "here); drop --counts-only to simulate it")  # fmt: skip
    variant = dict(window=window, softcap=softcap, pack_gqa=pack_gqa)
    variant["alibi_slopes"] = alibi_slopes(heads) if alibi else None
    g, s, nk = heads // kv_heads, itemsize(dtype), nk or n
    blocks = configure_shape(algo, False, batch * heads, n, nk, d, dtype, chip["scale"], chip["causal"],
                             chip["block_rows"], chip["block_cols"], chip["blocks"], chip["sram_bytes"],
                             chip["hardware"], rows=g if pack_gqa else 1)  # fmt: skip
    Br, Bc = blocks["block_rows"], blocks["block_cols"]
    flags = dict(causal=chip["causal"], window=window, softcap=softcap is not None, alibi=alibi)
    lens = Counter(seqlens) if seqlens is not None else Counter({n: batch})  # each length once, times its count
    closed = {sched: sum((iomodel_variants.gqa(algo, times, heads, kv_heads, m, m if seqlens else nk, d, s, Br, Bc,
                                                 pack_gqa=sched, **flags) for m, times in lens.items()),
                         iomodel_variants.Counts(0, 0, 0, 0, 0))
              for sched in (False, True) if algo == "flash2" or not sched}  # fmt: skip
    summary = dict(algorithm=algo, n=n, nk=nk, d=d, batch=batch, heads=heads, kv_heads=kv_heads, dtype=dtype,
                   block_rows=Br, block_cols=Bc, causal=chip["causal"], window=window, alibi=alibi, softcap=softcap,
                   pack_gqa=pack_gqa, seqlens=list(seqlens) if seqlens else None,
                   closed_form={("packed" if k else "per_head"): _counts(c) for k, c in closed.items()})  # fmt: skip
    if seqlens is not None:
        summary["padded_hbm_bytes"] = iomodel_variants.gqa(algo, batch, heads, kv_heads, n, n, d, s, Br, Bc,
                                                           pack_gqa=pack_gqa, **flags).hbm_bytes  # fmt: skip
    verdict, chosen = True, closed.get(pack_gqa, closed[False])
    if not counts_only:
        with Work(quiet) as work:  # a bar after 2 s, as a plain run's (helper 114: 9.7 s silent)
            rng = np.random.default_rng(seed)
            options = chip | variant | dict(block_rows=Br, block_cols=Bc)
            if seqlens is not None:
                cu = np.cumsum([0, *seqlens])
                q, k, v = (
                    rng.standard_normal((cu[-1], h, d)).astype(DTYPES[dtype]) for h in (heads, kv_heads, kv_heads)
                )
                with work.simulating(f"{algo} forward", chosen.hbm_bytes):
                    result = sim.run_varlen(algo, q, k, v, cu, cu, **options)
                with work.running("float64 reference"):
                    ref, _ = reference_variants.varlen(q, k, v, cu, cu, **_definition(options))
            else:
                q = rng.standard_normal((batch, heads, n, d)).astype(DTYPES[dtype])
                k, v = (rng.standard_normal((batch, kv_heads, nk, d)).astype(q.dtype) for _ in range(2))
                with work.simulating(f"{algo} forward", chosen.hbm_bytes):
                    result = sim.run(algo, q, k, v, **options)
                with work.running("float64 reference"):
                    ref, _ = reference_variants.attention(q, k, v, **_definition(options))
            err = np.abs(result.output.astype(np.float64) - ref)
            s_max = 0.0
            if algo == "standard":  # its stored S rounds relative to max|S|
                s_max = (reference_variants.varlen_score_max(q, k, cu, cu, **_definition(options)) if seqlens is not None
                         else reference_variants.score_max(q, k, **_definition(options)))  # fmt: skip
            slopes = options.get("alibi_slopes")
            bias = 0.0 if slopes is None else float(np.max(np.abs(slopes))) * max(n, nk)  # ALiBi adds to |S|
            tol = tolerance.tolerance(algo, dtype, d=d, nk=nk, block_cols=Bc, sigma=tolerance.score_scale(
                q, k, result.scale) + bias, v_max=float(np.abs(v.astype(np.float64)).max()),
                ref_max=float(np.abs(ref).max()), s_max=s_max, softcap=softcap is not None, alibi=alibi)  # fmt: skip
            stated = tol.bound != float("inf")  # no bound: compared, no verdict (red team 92: "within no bound")
            verdict, formula = (bool(err.max(initial=0.0) <= tol.bound) if stated else None), tol.formula
            summary |= dict(hbm_read_bytes=result.hbm_read_bytes, hbm_write_bytes=result.hbm_write_bytes,
                            hbm_bytes=result.hbm_bytes, flops=result.flops, skipped_tiles=result.skipped_tiles,
                            per_tensor=result.ledger.per_tensor(), max_abs_err=float(err.max()),
                            tolerance={"formula": formula, "bound": tol.bound, "within": verdict})  # fmt: skip
            if backward:
                do = rng.standard_normal(q.shape).astype(q.dtype)
                with work.running(f"{algo} backward"):
                    grads = sim.backward(result, do)
                definition = {
                    key: value for key, value in _definition(options).items() if key not in ("causal", "scale")
                }
                with work.running("float64 gradients"):
                    check = gradient_tolerance.check(grads, q, k, v, do, forward_bound=tol.bound, forward_block_cols=Bc,
                                                     cu_seqlens=cu if seqlens is not None else None,
                                                     pack_gqa=pack_gqa, **definition)  # fmt: skip
                summary["backward"] = dict(
                    hbm_bytes=grads.hbm_bytes, flops=grads.flops, block_rows=grads.block_rows, block_cols=grads.block_cols,
                    max_abs_err=check["max_abs_err"], tolerance=check["tolerance"],
                    **{key: check[key] for key in gradient_tolerance.NOTES if key in check},
                )  # fmt: skip
                if check["tolerance"] and not check["tolerance"]["within"]:
                    verdict = False
    if not emit_json(summary, as_json, indent=None):
        console.print(table(summary))
    return 1 if verdict is False else 0


def table(r: dict) -> Table:
    """The variant run's table: its bytes against each schedule's closed form, packed against padded, its error."""
    title = (f"{r['algorithm']} · N={r['n']}, Nk={r['nk']}, d={r['d']}, batch={r['batch']}, Hq={r['heads']}, "
             f"Hkv={r['kv_heads']}, {r['dtype']}")  # fmt: skip
    extras = [name for name in ("window", "softcap") if r[name] is not None] + ["alibi"] * r["alibi"]
    extras += ["causal"] * r["causal"] + ["packed GQA"] * r["pack_gqa"]
    out = Table(title=" · ".join([title, *(f"{e}={r[e]}" if e in ("window", "softcap") else e for e in extras)]),
                title_justify="left", show_edge=False)  # fmt: skip
    out.add_column("")
    out.add_column("HBM bytes", justify="right")
    out.add_column("", justify="left")
    if "hbm_bytes" in r:
        out.add_row("simulated", count(r["hbm_bytes"]), decimal_bytes(r["hbm_bytes"]))
        out.add_row("tiles skipped by the mask", count(r["skipped_tiles"]), "")
    for name, c in r["closed_form"].items():
        chosen = (name == "packed") == r["pack_gqa"]
        label = f"closed form, {'packed schedule' if name == 'packed' else 'each head reads its K/V'}"
        out.add_row(label + (" (this run)" if chosen else ""), count(c["hbm_bytes"]), decimal_bytes(c["hbm_bytes"]))
    if r["seqlens"]:
        out.add_row(f"padded to {r['n']} ({r['batch']} sequences)", count(r["padded_hbm_bytes"]),
                    decimal_bytes(r["padded_hbm_bytes"]))  # fmt: skip
    if "max_abs_err" in r:
        within = {True: "within ", False: "OUTSIDE ", None: "vs float64: "}[r["tolerance"]["within"]]
        out.add_row("max |O − float64|", f"{r['max_abs_err']:.3g}", f"{within}{r['tolerance']['formula']}")
    if "backward" in r:
        b = r["backward"]
        errs = ", ".join(f"{k} {v:.3g}" for k, v in b["max_abs_err"].items())
        out.add_row("backward", count(b["hbm_bytes"]), f"max |error|: {errs}")
        tol = b["tolerance"]
        for name in ("dq", "dk", "dv"):
            said = f"{'within' if tol['each'][name] else 'OUTSIDE'} {tol['bound'][name]:.3g}" if tol else "vs float64"
            past = b.get("past_range", {}).get(name)
            said += f" ({count(past)} past {r['dtype']}'s range: ±inf, as the exact values round)" if past else ""
            out.add_row(f"max |{name} − float64|", f"{b['max_abs_err'][name]:.3g}", said)
        if b.get("no_bound"):
            out.add_row("gradients: no bound stated", "", b["no_bound"])
    return out


def _counts(c) -> dict:
    return dict(hbm_read_bytes=c.hbm_read_bytes, hbm_write_bytes=c.hbm_write_bytes, hbm_bytes=c.hbm_bytes,
                flops=c.flops)  # fmt: skip


def _definition(options: dict) -> dict:
    """The float64 definition's keyword arguments among a run's."""
    return {key: options[key] for key in ("causal", "scale", "window", "alibi_slopes", "softcap")}
