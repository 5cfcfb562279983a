"""The registry: what every caller reads, and that a new algorithm needs one file and one entry, nothing else."""

import numpy as np
import pytest

import sim
from sim.algorithms import flash2, registry
from sim.algorithms.registry import REGISTRY, Algorithm, get
from sim.api import reference
from sim.api.inputs import random_inputs
from sim.machine import blocks, iomodel

BUILT_IN = ("standard", "flash1", "flash2")  # a registered fourth algorithm comes after them, and no test changes


def test_the_registry_holds_the_three_listings_and_sim_algorithms_names_them():
    assert sim.ALGORITHMS == tuple(REGISTRY) and tuple(REGISTRY)[:3] == BUILT_IN
    assert {name: REGISTRY[name].saves for name in BUILT_IN} == {
        "standard": ("P",),
        "flash1": ("ℓ", "m"),
        "flash2": ("L",),
    }
    assert [name for name in BUILT_IN if REGISTRY[name].dropout] == ["flash1", "flash2"]
    assert all(REGISTRY[name].backward is not None and REGISTRY[name].backward_kernels is not None for name in BUILT_IN)


def test_an_unknown_name_is_one_line_naming_the_choices():
    with pytest.raises(sim.InputError, match=rf"^algorithm: unknown 'flash3'; choose one of {', '.join(REGISTRY)}$"):
        get("flash3")


def _footprint(Br, Bc, d, s):  # a new algorithm's own footprint, as its file would bring it
    return blocks.flash2_footprint(Br, Bc, d, s)


NEW = Algorithm(
    name="flash2-again",
    title="FlashAttention-2, registered a second time",
    paper="test",
    description="flash2's listing under another name, with no backward",
    forward=flash2.forward,
    kernels=iomodel.flash2_kernels,
    footprint=_footprint,
    grows="rows",
    saves=("L",),
    dropout=True,
)


def test_a_new_entry_runs_counts_and_fits_without_touching_anything_else(monkeypatch):
    monkeypatch.setitem(REGISTRY, NEW.name, NEW)
    q, k, v, do = random_inputs(1, 2, 40, 33, 8, "fp32", 4, grad=True)
    r = sim.run(NEW.name, q, k, v, causal=True, sram_bytes=8192)
    assert np.abs(r.output - reference.attention(q, k, v, causal=True)[0]).max() < 1e-5
    assert (r.block_rows, r.block_cols) == registry.fit("flash2", 40, 33, 8, 4, 8192)
    c = registry.counts(NEW.name, 40, 33, 8, 4, r.block_rows, r.block_cols, True).times(2)
    assert (r.hbm_read_bytes, r.hbm_write_bytes, r.flops, r.exps, r.elementwise) == (
        c.hbm_read_bytes, c.hbm_write_bytes, c.flops, c.exps, c.elementwise,
    )  # fmt: skip
    assert sim.count(
        NEW.name, n=40, nk=33, d=8, heads=2, dtype="fp32", causal=True, sram_bytes=8192
    ).ledger.to_dict() == (r.ledger.to_dict())
    with pytest.raises(sim.InputError, match=r"^result: flash2-again has no backward listing"):
        sim.backward(r, do)
    with pytest.raises(sim.InputError, match=r"^algorithm: flash2-again has no backward listing"):
        sim.backward(NEW.name, q, k, v, r.output, r.lse, do)
