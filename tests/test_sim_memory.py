"""The memory model: bytes booked per transfer, real rounding on write, SRAM capacity, on-chip-only math."""

import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import sim
from sim.core.errors import SRAMOverflowError
from sim.machine.memory import Chip


def chip_with(tensors, sram_bytes=4096, record="counts"):
    chip = Chip(sram_bytes, record)
    for name, x in tensors.items():
        chip.hbm.place(name, x)
    return chip


def test_load_books_storage_bytes_and_returns_float32():
    x = np.arange(24, dtype=np.float16).reshape(6, 4)
    chip = chip_with({"X": x})
    tile = chip.load("X_i", "X", (2, 5))
    assert tile.dtype == np.float32 and np.array_equal(tile, x[2:5].astype(np.float32))
    assert chip.ledger.hbm_read_bytes == 3 * 4 * 2
    assert chip.ledger.bytes["hbm", "X", "read"] == 24
    assert chip.sram.used == 24  # resident at its storage size


@pytest.mark.parametrize("dtype,unit", [(np.float16, 2.0**-11), (ml_dtypes.bfloat16, 2.0**-8)])
def test_store_rounds_to_the_storage_dtype(dtype, unit):
    chip = chip_with({})
    chip.hbm.alloc("O", (1, 3), dtype)
    value = chip.put("O_i", np.array([[1.0 + unit / 3, 1.0 + unit * 1.5, 3.14159265]]))
    chip.store("O", value, (0, 1))
    stored = chip.hbm.tensors["O"].astype(np.float64)[0]
    assert stored[0] == 1.0  # rounded down to the nearest representable value
    assert stored[1] == 1.0 + 2 * unit  # rounded up (ties and beyond go to the next step)
    assert abs(stored[2] - 3.14159265) <= 2 * unit * 3.14159265
    assert chip.ledger.hbm_write_bytes == 3 * np.dtype(dtype).itemsize


def test_sram_overflow_names_every_resident_buffer():
    chip = chip_with({"K": np.zeros((64, 8), np.float32)}, sram_bytes=3000)
    chip.load("K_j", "K", (0, 32))  # 1024 B
    chip.put("m_i", np.zeros(100))  # 400 B
    with pytest.raises(SRAMOverflowError) as e:
        chip.put("S_ij", np.zeros((32, 32)))  # 4096 B
    message = str(e.value)
    assert "S_ij (4.0 KiB)" in message and "K_j 1.0 KiB" in message and "m_i 400 B" in message
    assert "2.9 KiB" in message and "\n" not in message


def test_replacing_a_buffer_frees_it_first_and_peak_is_kept():
    chip = chip_with({})
    chip.put("S_ij", np.zeros(100))
    chip.put("P_ij", np.ones(100), replaces=["S_ij"])
    assert chip.sram.used == 400 and set(chip.sram.buffers) == {"P_ij"}
    chip.put("x", np.zeros(200))
    chip.free("x", "P_ij")
    assert chip.sram.used == 0 and chip.sram.peak == 1200


def test_matmul_refuses_operands_not_in_sram():
    chip = chip_with({"A": np.ones((4, 4), np.float32)})
    A = chip.load("A_i", "A", (0, 4))
    with pytest.raises(AssertionError, match="resident in SRAM"):
        chip.matmul(A, np.ones((4, 4), np.float32))
    assert np.array_equal(chip.matmul(A, A.T), np.full((4, 4), 4.0))
    assert chip.ledger.flops == 2 * 4 * 4 * 4


def test_values_trace_records_before_and_after():
    chip = chip_with({}, record="values")
    from sim.machine.trace import Trace

    chip.trace = Trace("test", {}, {})
    with chip.step("compute", 1, "m = 1"):
        chip.put("m", np.ones(2))
    with chip.step("compute", 2, "m = 2"):
        chip.put("m", np.full(2, 2.0))
    first, second = chip.trace.steps
    assert first.values == {"before": {}, "after": {"m": [1.0, 1.0]}}
    assert second.values == {"before": {"m": [1.0, 1.0]}, "after": {"m": [2.0, 2.0]}}
    assert second.sram_bytes == 8


def test_flash_algorithms_never_allocate_an_n_by_n_array():
    N, d = 2048, 16
    q, k, v = (np.random.default_rng(i).standard_normal((N, d)).astype(np.float16) for i in range(3))
    n_by_n = 4 * N * N  # one float32 N×N matrix: 16 MiB
    for algorithm in ("flash1", "flash2"):
        tracemalloc.start()
        sim.run(algorithm, q, k, v)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < n_by_n / 8, f"{algorithm} peaked at {peak} bytes"
    tracemalloc.start()
    sim.run("standard", q, k, v)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak > n_by_n / 2  # standard attention does hold S and P (fp16, N×N each) in HBM
