"""Rung 7's L2 as its code moves bytes (gpu.lab.check_report.l2_counts, l2_table), worked by hand (run 40-model10)."""

from gpu.lab import check_report
from gpu.lab.model_grid import launched

# d = 64 (Br = 128, Bc = 128), N = 256, causal, 1 × 2: Q block 0 sees K/V block 0, Q block 1 sees blocks 0 and 1
SHAPE = {"d": 64, "n": 256, "causal": True, "batch": 1, "heads": 2}
ACC = 2 * 256 * 64 * 4  # the float32 accumulator of dQ: 131,072 bytes
DQ_I = 128 * 64 * 4  # one Q block's dQ_i, float32: 32,768 bytes
ADDS = 2 * (1 + 2) * DQ_I  # each head adds dQ_0 once and dQ_1 twice: 196,608
GRADS = 2 * 2 * 256 * 64 * 2  # dK and dV of both heads, fp16: 131,072
INPUTS = 2 * 4 * 256 * 64 * 2 + 2 * 2 * 256 * 4  # Q, K, V, dO and L_i, D_i of both heads: 266,240


def test_rung_7s_launches_move_these_bytes():
    c = check_report.l2_counts(SHAPE)
    # O, dO and L read; the accumulator, D and the L_i, D_i blocks written
    assert c["pre-pass"] == {"read": ACC + 2 * 256 * 4, "write": ACC + 2 * 256 * 4 + 2 * 256 * 8}
    assert c["dQ rounded"] == {"read": ACC, "write": ACC // 2}
    assert c["main"] == {
        "inputs": INPUTS,
        "write_sectors": 2 * GRADS,  # a quad's 16 bytes of a row in a 32-byte sector of its own
        "reduced": ADDS,
        "across": ADDS / 2 + GRADS / 2 + INPUTS,  # half of the adds and stores cross; every input byte once
    }
    assert c["main"]["across"] == 430_080


def test_the_table_sets_ncus_counts_beside_them():
    pre, main, dq = launched("backward", 7)
    ns = 1000.0
    rows = [
        {"kernel": pre, "lts__t_bytes.sum": 1.5 * (133_120 + 137_216)},
        {"kernel": main, "lts__t_bytes.sum": 1.5 * (ADDS + 2 * GRADS) + 250_000, "lts__t_sectors_op_red.sum": 9216,
         "l1tex__m_xbar2l1tex_read_bytes.sum": 500_000, "gpu__time_duration.sum": ns,
         "lts__throughput.avg.pct_of_peak_sustained_elapsed": 30.0},
        {"kernel": dq, "lts__t_bytes.sum": 2 * 1.5 * (ACC + ACC // 2)},
    ]  # fmt: skip
    record = {"grid": [SHAPE], "profiled": [r | {"shape": 0, "direction": "backward", "rung": 7} for r in rows]}
    across = 430_080 / (ns * 1e-9) / (3.01e12 / 2 / 0.87) * 100  # the reduce-add loop: 3.01 TB/s at 87%, half across
    assert round(across, 1) == 24.9
    assert check_report.l2_table(record)[1] == " 64   256 c 1×2   | ×1.000 ×2.000 | ×1.0000 | ×0.50 |  24.9 /  30.0"
