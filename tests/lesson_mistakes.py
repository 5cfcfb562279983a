"""Two typical wrong answers to every exercise of every lesson, and what the check must say to each.

Each entry: the exercise's cell source in a wrong version, and phrases that a ✗ line of that lesson must
contain: the named variable or tensor and the actionable part. Written by hand from the mistakes students make.
"""

MISTAKES = {
    "01_memory_wall": [
        {
            "attainable": (
                "def attainable(I, hw, dtype):\n    return max(hw.peak(dtype), I * hw.hbm_bandwidth)\n",
                ["✗ attainable FLOP/s of five kernels: standard kernel 1: got"],
            ),
            "smallest_compute_bound_matmul": (
                "def smallest_compute_bound_matmul(hw, dtype):\n"
                "    return int(1.5 * itemsize(dtype) * hw.peak(dtype) / hw.hbm_bandwidth)\n",
                ["A100-40GB fp16: got", "off by one"],
            ),
        },
        {
            "attainable": (
                "def attainable(I, hw, dtype):\n    return I * hw.hbm_bandwidth\n",
                ["five kernels: matmul n = 8192: got"],
            ),
            "smallest_compute_bound_matmul": (
                "def smallest_compute_bound_matmul(hw, dtype):\n"
                "    return int(1.5 * hw.peak(dtype) / hw.hbm_bandwidth) + 1\n",
                ["A100-40GB fp16: got"],
            ),
        },
    ],
    "02_standard_attention": [
        {
            "standard_hbm_bytes": (
                "def standard_hbm_bytes(N, Nk, d, s):\n"
                "    read = s * (N * d + Nk * d) + s * (N * Nk + Nk * d)  # kernel 2's read of S forgotten\n"
                "    return read, s * (2 * N * Nk + N * d)\n",
                ["read: got", "too few — as many as S or P", "left out?"],
            ),
            "largest_n": (
                "def largest_n(d, s, heads, capacity):\n"
                "    return int(math.sqrt(capacity / (heads * s * 2)))  # S and P only\n",
                ["A100-40GB: got"],
            ),
        },
        {
            "standard_hbm_bytes": (
                "def standard_hbm_bytes(N, Nk, d, s):\n"
                "    read = s * (N * d + Nk * d) + s * N * Nk + s * (N * Nk + Nk * d)\n"
                "    return read, s * (N * Nk + N * d)  # P's write forgotten\n",
                ["written: got", "too few — as many as S or P"],
            ),
            "largest_n": (
                "def largest_n(d, s, heads, capacity):\n"
                "    C = capacity // s  # every head forgotten\n"
                "    return int((-4 * d + math.sqrt(16 * d * d + 8 * C)) / 4)\n",
                ["A100-40GB: got"],
            ),
        },
    ],
    "03_online_softmax": [
        {
            "online_update": (
                "def online_update(m, ℓ, x):\n    m_new = np.maximum(m, x)\n    return m_new, ℓ + np.exp(x - m_new)\n",
                ["✗ one pass over 1,000 logits in the hundreds: ℓ_new: got"],
            ),
            "merge": (
                "def merge(m1, ℓ1, m2, ℓ2):\n    m = max(m1, m2)\n    return m, ℓ1 * np.exp(m1 - m) + ℓ2 * np.exp(m2 - m)\n",
                [
                    "✗ merge of two states of five rows: your code raised ValueError in merge, line 2:",
                    "m = max(m1, m2)",
                ],
            ),
        },
        {
            "online_update": (
                "def online_update(m, ℓ, x):\n    m_new = np.maximum(m, x)\n    return m_new, ℓ * np.exp(m - m_new) + np.exp(x)\n",
                ["✗ one update from the empty state: ℓ_new: got 20.0855, expected 1"],
            ),
            "merge": (
                "def merge(m1, ℓ1, m2, ℓ2):\n    m = np.maximum(m1, m2)\n    return m, ℓ1 + ℓ2 * np.exp(m2 - m)\n",
                ["✗ merge of two states of five rows: ℓ: "],
            ),
        },
    ],
    "04_tiling_walkthrough": [
        {
            "partial_output": (
                "def partial_output(Q_i, K_seen, V_seen, τ):\n"
                "    P = np.exp(τ * Q_i @ K_seen.T)\n"
                "    return P @ V_seen  # never divided by the row sums\n",
                ["✗ O_0 after K/V block 0:", "a row's normalisation"],
            ),
            "update": (
                "def update(O_i, ℓ_i, m_i, S_ij, V_j):\n"
                "    m̃ = S_ij.max(axis=1)\n"
                "    P̃ = np.exp(S_ij - m̃[:, None])\n"
                "    m_new = np.maximum(m_i, m̃)\n"
                "    α, β = np.exp(m_i - m_new), np.exp(m̃ - m_new)\n"
                "    ℓ_new = α * ℓ_i + β * P̃.sum(axis=1)\n"
                "    return m_new, ℓ_new, (α[:, None] * ℓ_i[:, None] * O_i + β[:, None] * (P̃ @ V_j)) / ℓ_new[:, None]\n",
                [
                    "✗ lines 10–12 for (i = 0, j = 1): O_i: shape (2,), expected (2, 4)",
                    "return O_i, ℓ_i_new, m_i_new in that order",
                ],
            ),
        },
        {
            "partial_output": (
                "def partial_output(Q_i, K_seen, V_seen, τ):\n"
                "    S = Q_i @ K_seen.T  # τ forgotten\n"
                "    P = np.exp(S - S.max(axis=1, keepdims=True))\n"
                "    return P / P.sum(axis=1, keepdims=True) @ V_seen\n",
                ["✗ O_0 after K/V block 0:", "values differ"],
            ),
            "update": (
                "def update(O_i, ℓ_i, m_i, S_ij, V_j):\n"
                "    m̃ = S_ij.max(axis=1)\n"
                "    P̃ = np.exp(S_ij - m̃[:, None])\n"
                "    m_new = np.maximum(m_i, m̃)\n"
                "    α, β = np.exp(m_i - m_new), np.exp(m̃ - m_new)\n"
                "    ℓ_new = α * ℓ_i + β * P̃.sum(axis=1)\n"
                "    O_new = (α[:, None] * O_i + β[:, None] * (P̃ @ V_j)) / ℓ_new[:, None]  # O_i taken as unnormalised\n"
                "    return O_new, ℓ_new, m_new\n",
                ["✗ lines 10–12 for (i = 0, j = 1): O_i: "],
            ),
        },
    ],
    "05_counting_bytes": [
        {
            "flash2_bytes": (
                "def flash2_bytes(N, Nk, d, s, Br, Bc):\n"
                "    Tr = N // Br  # the ragged last Q block forgotten\n"
                "    return s * N * d + Tr * 2 * s * Nk * d, s * N * d + 4 * N\n",
                ["✗ flash2 bytes, N=100 Nk=70 d=16 fp16 Br=32 Bc=16: read: got", "1/4 of K and V together"],
            ),
            "flash1_bytes": (
                "def flash1_bytes(N, Nk, d, s, Br, Bc):\n"
                "    Tc = -(-Nk // Bc)\n"
                "    per_pass = s * N * d + 4 * 2 * N\n"
                "    return 2 * s * Nk * d + Tc * (s * N * d + per_pass), Tc * per_pass  # line 2 forgotten\n",
                ["flash1 bytes, N=100 Nk=70 d=16 fp16 Br=32 Bc=16: written: got", "too few"],
            ),
        },
        {
            "flash2_bytes": (
                "def flash2_bytes(N, Nk, d, s, Br, Bc):\n"
                "    Tr = -(-N // Br)\n"
                "    return s * N * d + Tr * 2 * s * Nk * d, s * N * d  # L forgotten\n",
                ["written: got", "too few — as many as L", "left out?"],
            ),
            "flash1_bytes": (
                "def flash1_bytes(N, Nk, d, s, Br, Bc):\n"
                "    Tc = -(-Nk // Bc)\n"
                "    per_pass = s * N * d + s * 2 * N  # ℓ and m in s bytes, not float32\n"
                "    return 2 * s * Nk * d + Tc * (s * N * d + per_pass), per_pass + Tc * per_pass\n",
                ["flash1 bytes, N=100 Nk=70 d=16 fp16 Br=32 Bc=16: read: got", "as many as ℓ or m"],
            ),
        },
    ],
    "06_causal_and_flash2": [
        {
            "blocks_read": (
                "def blocks_read(i, N, Nk, Br, Bc):\n"
                "    last_key = min((i + 1) * Br, N) - 1  # aligned top-left: Nk − N forgotten\n"
                "    return min(-(-Nk // Bc), last_key // Bc + 1)\n",
                ["✗ blocks read for every Q block, N=40 Nk=100 Br=16 Bc=32: Q block 0: got 1, expected"],
            ),
            "causal_flash2_bytes": (
                "def causal_flash2_bytes(N, Nk, d, s, Br, Bc):\n"
                "    keys = sum(blocks_read(i, N, Nk, Br, Bc) * Bc for i in range(-(-N // Br)))  # ragged block as full\n"
                "    return s * N * d + 2 * s * keys * d, s * N * d + 4 * N\n",
                ["causal flash2 bytes, N=100 Nk=100 d=16 fp16 Br=16 Bc=16: read: got", "too many"],
            ),
        },
        {
            "blocks_read": (
                "def blocks_read(i, N, Nk, Br, Bc):\n"
                "    last_key = min((i + 1) * Br, N) - 1 + Nk - N\n"
                "    return min(-(-Nk // Bc), last_key // Bc + 1)  # a block that sees no key forgotten\n",
                ["N=100 Nk=40 Br=16 Bc=8: Q block 0: got -", "expected 0"],
            ),
            "causal_flash2_bytes": (
                "def causal_flash2_bytes(N, Nk, d, s, Br, Bc):\n"
                "    keys = sum(min(Nk, blocks_read(i, N, Nk, Br, Bc) * Bc) for i in range(-(-N // Br)))\n"
                "    return s * N * d + 2 * s * keys * d, s * N * d  # L forgotten\n",
                ["written: got", "as many as L", "left out?"],
            ),
        },
    ],
    "07_backward_recomputation": [
        {
            "recompute_P": (
                "def recompute_P(S_ij, L_i):\n    P = np.exp(S_ij - S_ij.max(axis=1, keepdims=True))\n"
                "    return P / P.sum(axis=1, keepdims=True)  # the tile's own softmax\n",
                ["✗ P_ij from S_ij and L_i:", "a row's normalisation"],
            ),
            "backward_bytes": (
                "def flash2_backward_bytes(N, d, s, Bc):\n"
                "    Tc = -(-N // Bc)\n"
                "    once = 4 * s * N * d\n"
                "    return once + Tc * (3 * s * N * d + 8 * N + s * N * d)  # the pre-pass forgotten\n",
                ["✗ FlashAttention-2 backward bytes: got", "too few"],
            ),
        },
        {
            "recompute_P": (
                "def recompute_P(S_ij, L_i):\n    return np.exp(S_ij - L_i)  # L_i not a column\n",
                ["✗ P_ij from S_ij and L_i:", "values differ"],
            ),
            "backward_bytes": (
                "def flash2_backward_bytes(N, d, s, Bc):\n"
                "    Tc = -(-N // Bc)\n"
                "    prepass = 3 * s * N * d + 4 * N\n"
                "    return prepass + 4 * s * N * d + Tc * (3 * s * N * d + 8 * N)  # dQ_i's write-back forgotten\n",
                ["✗ FlashAttention-2 backward bytes: got", "too few"],
            ),
        },
    ],
    "08_real_gpu": [
        {
            "bench_flops": (
                "def bench_flops(n, d, batch, heads, causal):\n    return 4 * n * n * d * batch * heads  # causal ignored\n",
                ["causal): got", "2× the expected"],
            ),
            "roofline": (
                "def kernel_roofline_ms(row):\n"
                "    c = predicted(row)\n"
                "    return max(c.hbm_bytes / hw.hbm_bandwidth, c.flops / hw.peak(STORAGE[row['dtype']]))  # seconds\n",
                ["✗ the roofline time of every benchmark row: row 0", "1/1000 of the expected"],
            ),
            "dq_atomics": (
                "def dq_atomic_bytes(n, nk, d, heads, Br, Bc, causal):\n"
                "    return sum(b.rows * b.seen for b in iomodel.row_blocks(n, nk, Br, Bc, causal)) * d * F  # one head\n",
                ["✗ dQ atomics of both recorded backward comparisons: compare-backward-h100: got", "the right count"],
            ),
        },
        {
            "bench_flops": (
                "def bench_flops(n, d, batch, heads, causal):\n"
                "    return 2 * n * n * d * batch * heads / (2 if causal else 1)  # one matmul\n",
                ["✗ FLOPs of every benchmark row: row 0", "1/2 of the expected"],
            ),
            "roofline": (
                "def kernel_roofline_ms(row):\n"
                "    c = predicted(row)\n"
                "    return 1e3 * (c.hbm_bytes / hw.hbm_bandwidth + c.flops / hw.peak(STORAGE[row['dtype']]))\n",
                ["✗ the roofline time of every benchmark row: row 0"],
            ),
            "dq_atomics": (
                "def dq_atomic_bytes(n, nk, d, heads, Br, Bc, causal):\n"
                "    return sum(b.rows * b.seen for b in iomodel.row_blocks(n, nk, Br, Bc, causal)) * d * 2 * heads\n",
                ["compare-backward-h100: got", "1/2 of the right count"],
            ),
        },
    ],
    "09_flash_decoding": [
        {
            "combine": (
                "def combine(O_parts, lse_parts):\n"
                "    LSE = np.log(np.exp(lse_parts).sum(axis=0))  # no max subtracted\n"
                "    return (np.exp(lse_parts - LSE)[..., None] * O_parts).sum(axis=0), LSE\n",
                ["✗ combine, logits in the hundreds: O: ", "every wrong value is 0"],
            ),
            "split_bytes": (
                "def split_extra_bytes(Nq, d, s, P):\n    return P * s * Nq * d + 2 * 4 * P * Nq * (d + 1)  # q read P more times\n",
                ["✗ extra bytes of 8 splits: got", "too many", "Q read"],
            ),
        },
        {
            "combine": (
                "def combine(O_parts, lse_parts):\n"
                "    m = lse_parts.max(axis=0)\n"
                "    LSE = m + np.log(np.exp(lse_parts - m).sum(axis=0))\n"
                "    return (np.exp(lse_parts - LSE) * O_parts).sum(axis=0), LSE  # weights not broadcast over d\n",
                ["✗ combine: O and LSE: O: shape (4, 64), expected (1, 64) (summed over the wrong axis"],
            ),
            "split_bytes": (
                "def split_extra_bytes(Nq, d, s, P):\n"
                "    return (P - 1) * s * Nq * d + 4 * P * Nq * (d + 1)  # the combine's reads forgotten\n",
                ["✗ extra bytes of 8 splits: got", "too few", "O_parts read and lse_parts read together"],
            ),
        },
    ],
    "10_below_hbm": [
        {
            "waves": (
                "def waves(blocks, sms, blocks_per_sm):\n    return blocks // (sms * blocks_per_sm)  # the last wave dropped\n",
                ["✗ waves: 2000 blocks, 132 SMs, 2 per SM: got 7, expected 8", "off by one"],
            ),
            "dram_fits": (
                "def dram_read_when_it_fits(n, d, s, heads):\n    return 3 * n * d * s  # one head\n",
                ["✗ DRAM read, N = 4096, d = 128, 32 heads: got", "too few (1/32 of the right count)"],
            ),
            "exp_ratio": (
                "def exp_over_matmul(d, tensor_per_clock=4096, mufu_per_clock=16):\n"
                "    return (4 * d / tensor_per_clock) / (1 / mufu_per_clock)  # the matmuls over the exponentials\n",
                ["✗ MUFU / tensor at d = 128: got 2, expected 0.503906", "the reciprocal of the expected"],
            ),
        },
        {
            "waves": (
                "def waves(blocks, sms, blocks_per_sm):\n    return -(-blocks // sms)  # one block per SM\n",
                ["✗ waves: 2000 blocks, 132 SMs, 2 per SM: got 16, expected 8", "2× the expected: a factor"],
            ),
            "dram_fits": (
                "def dram_read_when_it_fits(n, d, s, heads):\n    return 4 * n * d * s * heads  # O counted as read\n",
                [
                    "✗ DRAM read, N = 4096, d = 128, 32 heads: got",
                    "too many — as many as one tensor of Q's shape",
                    "counted too often?",
                ],
            ),
            "exp_ratio": (
                "def exp_over_matmul(d, tensor_per_clock=4096, mufu_per_clock=16):\n"
                "    return (1 / mufu_per_clock) / (2 * d / tensor_per_clock)  # one matmul of two\n",
                ["✗ MUFU / tensor at d = 64: got 2, expected 1.00781", "2× the expected: a factor"],
            ),
        },
    ],
    "11_llm_attention": [
        {
            "kv_read_bytes": (
                "def kv_read_bytes(B, Hq, Hkv, N, Nk, d, s, Br, packed):\n"
                "    programs, rows = (B * Hkv, Hq // Hkv * N) if packed else (B * Hq, N)\n"
                "    return programs * -(-rows // Br) * Nk * d * s  # K only\n",
                ["✗ K/V bytes, per head", "too few — as many as K read or V read", "left out?"],
            ),
            "window_tiles": (
                "def window_tiles(N, B, w):\n    return sum(i - max(0, i - w // B) for i in range(N // B))  # j < i\n",
                ["✗ tiles at N = 256, B = 32, w = 64: got", "as many as the diagonal tiles (j = i)", "left out?"],
            ),
            "through_softcap": (
                "def through_softcap(dS, S, c):\n    return dS * (1 - np.tanh(S / c) ** 2) / c  # the outer c dropped\n",
                ["✗ dS through c·tanh(S/c), c = 5:", "1/5 of the expected: a factor missing or extra"],
            ),
            "padded_rows": (
                "def padded_rows(lengths):\n    return len(lengths) * max(lengths)  # every row of the padded batch\n",
                [
                    "✗ padded rows of the small batch: got 300 rows, expected 158 rows",
                    "the sequences' own rows",
                    "counted too often?",
                ],
            ),
            "paged_reads": (
                "def paged_reads(n, P, d, s):\n    return n * d * s, 4 * -(-n // P)  # K only\n",
                [
                    "✗ paged reads, n = 250, pages of 16: K and V bytes: got",
                    "as many as K_cache read or V_cache read",
                    "left out?",
                ],
            ),
        },
        {
            "kv_read_bytes": (
                "def kv_read_bytes(B, Hq, Hkv, N, Nk, d, s, Br, packed):\n"
                "    return B * Hkv * 2 * Nk * d * s  # each K/V head read once, whatever the schedule\n",
                ["✗ K/V bytes, per head", "too few (1/4 of the right count)"],
            ),
            "window_tiles": (
                "def window_tiles(N, B, w):\n    return sum(i - max(0, i - w) + 1 for i in range(N // B))  # w in rows\n",
                [
                    "✗ tiles at N = 256, B = 32, w = 64: got 36 tiles, expected 21 tiles",
                    "as many as the causal tiles left of the window",
                    "counted too often?",
                ],
            ),
            "through_softcap": (
                "def through_softcap(dS, S, c):\n    return dS * c * (1 - np.tanh(S / c) ** 2)  # the inner 1/c dropped\n",
                ["✗ dS through c·tanh(S/c), c = 5:", "5× the expected: a factor missing or extra"],
            ),
            "padded_rows": (
                "def padded_rows(lengths):\n    return 1 - sum(lengths) / (len(lengths) * max(lengths))  # a share\n",
                ["✗ padded rows of the small batch: expected a whole number of rows, got float"],
            ),
            "paged_reads": (
                "def paged_reads(n, P, d, s):\n    return 2 * n * d * s, 4 * (n // P)  # the last page dropped\n",
                ["block-table bytes: got 60 B, expected 64 B", "as many as one int32 entry", "left out?"],
            ),
        },
    ],
    "12_beyond_one_gpu": [
        {
            "schedule": (
                "def schedule(P):\n    return [[(p + t) % P for p in range(P)] for t in range(P)]  # the wrong way round\n",
                ["✗ schedule of 5 devices: held[1]: 5 of 5 values differ; first at index (0,): got 1, expected 4"],
            ),
            "ring_bytes": (
                "def ring_bytes(N, d, s, P, H):\n    return P * 2 * (N // P) * d * s * H  # a send after the last step\n",
                ["✗ bytes one device sends, P = 4, fp16: got", "too many", "K sent and V sent together", "one pass"],
            ),
            "shortest_shard": (
                "def shortest_shard(peak, bandwidth, s):\n    return int(s * peak / (2 * bandwidth))  # rounded down\n",
                ["✗ shortest shard over NVLink4: got 2,198 rows, expected 2,199 rows", "off by one"],
            ),
            "zigzag": (
                "def zigzag(N, P):\n    c = N // (2 * P)\n"
                "    return [[(p * c, (p + 1) * c), ((P + p) * c, (P + p + 1) * c)] for p in range(P)]  # halves\n",
                ["✗ zigzag, N = 64, P = 4: device 0: 2 of 4 values differ; first at index (1, 0): got 32, expected 56"],
            ),
        },
        {
            "schedule": (
                "def schedule(P):\n    return [[(p - t - 1) % P for p in range(P)] for t in range(P)]  # after the first send\n",
                ["✗ schedule of 5 devices: held[0]: 5 of 5 values differ; first at index (0,): got 4, expected 0"],
            ),
            "ring_bytes": (
                "def ring_bytes(N, d, s, P, H):\n    return (P - 1) * (N // P) * d * s * H  # K only\n",
                ["✗ bytes one device sends, P = 4, fp16: got", "too few — as many as K sent or V sent", "left out?"],
            ),
            "shortest_shard": (
                "def shortest_shard(peak, bandwidth, s):\n    return int(-(-s * peak // bandwidth))  # the 2 dropped\n",
                ["✗ shortest shard over NVLink4: got", "too many (2× the right count)"],
            ),
            "zigzag": (
                "def zigzag(N, P):\n    c = N // P\n"
                "    return [[(p * c, (p + 1) * c), ((2 * P - 1 - p) * c, (2 * P - p) * c)] for p in range(P)]\n",
                ["✗ zigzag, N = 64, P = 4: device 0: 3 of 4 values differ"],
            ),
        },
    ],
    "13_inside_the_sm": [
        {
            "sectors_touched": (
                "def sectors_touched(addresses, width):\n    return len(set((addresses // 32).tolist()))  # first bytes only\n",
                [
                    "✗ sectors of four warp accesses: 8 B lanes across sector edges: got 32, expected 33",
                    "off by one",
                ],
            ),
            "bank_wavefronts": (
                "def bank_wavefronts(addresses):\n    return int(np.bincount((addresses // 4) % 32, minlength=32).max())  # lanes, not words\n",
                ["✗ wavefronts of five shared-memory accesses: one word for all: got 32, expected 1"],
            ),
            "copy_ratio": (
                "def copy_ratio(row_bytes, pad):\n    return 1 + pad / row_bytes  # the padding's share of the bytes\n",
                ["✗ L2 → SM per byte asked, five paddings: 128 B rows + 16 B: got 1.125, expected 1.5"],
            ),
        },
        {
            "sectors_touched": (
                "def sectors_touched(addresses, width):\n    return len(addresses) * width // 32  # the bytes asked, in sectors\n",
                ["sectors of four warp accesses: shifted by 4 bytes: got 4, expected 5", "off by one"],
            ),
            "bank_wavefronts": (
                "def bank_wavefronts(addresses):\n    return len(set(((addresses // 4) % 32).tolist()))  # banks used\n",
                ["✗ wavefronts of five shared-memory accesses: consecutive words: got 32, expected 1"],
            ),
            "copy_ratio": (
                "def copy_ratio(row_bytes, pad):\n    return 1.5 if pad else 1.0\n",
                ["✗ L2 → SM per byte asked, five paddings: 128 B rows + 32 B: got 1.5, expected 1"],
            ),
        },
    ],
}


# More wrong answers, and a few right ones written another way, each with the exact verdict lines its check cell
# prints. A lesson runs once, unsolved, then each answer in turn with its exercise's check cell after it, in one
# kernel (`notebook_runner.retry`): an answer that changes its inputs in place is run twice, as a student re-runs.
MORE_MISTAKES = {
    "01_memory_wall": [
        (
            "attainable",
            (
                "def attainable(I, hw, dtype):\n    return min(hw.peak(dtype), I * hw.hbm_bandwidth), 'memory'  "
                "# and the bound\n"
            ),
            [
                (
                    "✗ attainable FLOP/s of five kernels: standard kernel 1: got a tuple of 2 values where one "
                    "number is expected · stuck? hint(1)"
                ),
            ],
        ),
        (
            "attainable",
            (
                "def attainable(I, hw, dtype):\n    return min(hw.peak(dtype), I * hw.hbm_bandwidth) / 1e12  # "
                "in TFLOP/s\n"
            ),
            [
                (
                    "✗ attainable FLOP/s of five kernels: standard kernel 1: got 96.5042, expected 9.65042e+13 — "
                    "1e-12 × the expected: a unit prefix (k, M, G, T; m, µ, n) off? · stuck? hint(1)"
                ),
            ],
        ),
        (
            "attainable",
            (
                "def attainable(I, hw, dtype):\n    return np.minimum(hw.peak(dtype), I * hw.hbm_bandwidth)  # "
                "NumPy's minimum\n"
            ),
            [
                ("✓ attainable FLOP/s of five kernels"),
            ],
        ),
    ],
    "02_standard_attention": [
        (
            "standard_hbm_bytes",
            (
                "def standard_hbm_bytes(N, Nk, d, s):\n    read = s * (N * d + Nk * d) + s * N * Nk + s * (N * "
                "Nk + Nk * d)\n    written = s * (2 * N * Nk + N * d)  # never returned\n"
            ),
            [
                (
                    "✗ Algorithm 0's HBM bytes (read, written) at N, Nk, d = 100, 173, 24 (fp16): got None: your "
                    "function returns nothing — a `return` missing? · stuck? hint(1)"
                ),
                (
                    "✗ Algorithm 0's HBM bytes (read, written) at N, Nk, d = 64, 48, 16 (fp32): got None: your "
                    "function returns nothing — a `return` missing? · stuck? hint(1)"
                ),
            ],
        ),
        (
            "standard_hbm_bytes",
            (
                "def standard_hbm_bytes(N, Nk, d, s):\n    return s * (N * d + Nk * d) + s * N * Nk + s * (N * "
                "Nk + Nk * d) + s * (2 * N * Nk + N * d)  # the sum\n"
            ),
            [
                (
                    "✗ Algorithm 0's HBM bytes (read, written) at N, Nk, d = 100, 173, 24 (fp16): return 2 "
                    "values (read, written), not one int · stuck? hint(1)"
                ),
                (
                    "✗ Algorithm 0's HBM bytes (read, written) at N, Nk, d = 64, 48, 16 (fp32): return 2 values "
                    "(read, written), not one int · stuck? hint(1)"
                ),
            ],
        ),
        (
            "standard_hbm_bytes",
            (
                "def standard_hbm_bytes(N, Nk, d, s):\n    read = s * (N * d + Nk * d) + s * N * Nk + s * (N * "
                "Nk + Nk * d)\n    return read / 1, s * (2 * N * Nk + N * d)  # a float\n"
            ),
            [
                (
                    "✗ Algorithm 0's HBM bytes (read, written) at N, Nk, d = 100, 173, 24 (fp16): read: got "
                    "90,608.0 B, a float: the right count, but a count is a whole number (// not /?) · stuck? "
                    "hint(1)"
                ),
                (
                    "✗ Algorithm 0's HBM bytes (read, written) at N, Nk, d = 64, 48, 16 (fp32): read: got "
                    "34,816.0 B, a float: the right count, but a count is a whole number (// not /?) · stuck? "
                    "hint(1)"
                ),
            ],
        ),
    ],
    "03_online_softmax": [
        (
            "online_update",
            (
                "def online_update(m, ℓ, x):\n    m_new = np.float32(max(m, x))  # float32\n    return m_new, "
                "np.float32(ℓ * np.exp(m - m_new) + np.exp(x - m_new))\n"
            ),
            [
                ("✓ one update from the empty state"),
                (
                    "✗ one pass over 1,000 logits in the hundreds: m_new: got 356.58533, expected 356.58532 — "
                    "float32's rounding: compute in float64 (NumPy's default) · stuck? hint(1)"
                ),
            ],
        ),
        (
            "online_update",
            (
                "def online_update(m, ℓ, x):\n    m_new = np.maximum(m, x)\n    ℓ_new = ℓ * np.exp(m - m_new) + "
                "np.exp(x - m_new)  # never returned\n"
            ),
            [
                (
                    "✗ one update from the empty state: online_update: got None: your function returns nothing — "
                    "a `return` missing? · stuck? hint(1)"
                ),
                (
                    "✗ one pass over 1,000 logits in the hundreds: online_update: got None: your function returns "
                    "nothing — a `return` missing? · stuck? hint(1)"
                ),
            ],
        ),
        (
            "merge",
            ("def merge(m1, ℓ1, m2, ℓ2):\n    return m1, ℓ1 + ℓ2 * np.exp(m2 - m1)  # m1 taken as the larger\n"),
            [
                (
                    "✗ merge of two states of five rows: m: 2 of 5 values differ; first at index (0,): got "
                    "87.6356, expected 103.762 · stuck? hint(1)"
                ),
                (
                    "✗ 16 block states of a row merged from the empty state: m: got -inf, expected 336.903 — −∞: "
                    "the empty state's m = −∞ kept (the other part's m not taken), or a log of 0? · stuck? "
                    "hint(1)"
                ),
            ],
        ),
        (
            "online_update",
            (
                "def online_update(m, ℓ, x):\n    m_new = np.maximum(m, x)\n    return {'m_new': m_new, "
                "'ℓ_new': ℓ * np.exp(m - m_new) + np.exp(x - m_new)}  # a dict\n"
            ),
            [
                (
                    "✗ one update from the empty state: online_update: got a dict; return the tuple (m_new, ℓ_new) "
                    "· stuck? hint(1)"
                ),
                (
                    "✗ one pass over 1,000 logits in the hundreds: online_update: got a dict; return the tuple "
                    "(m_new, ℓ_new) · stuck? hint(1)"
                ),
            ],
        ),
        (
            "merge",
            (
                "def merge(m1, ℓ1, m2, ℓ2):\n    m = np.maximum(m1, m2)\n    return {'m': m, 'l': ℓ1 * np.exp(m1 - m) "
                "+ ℓ2 * np.exp(m2 - m)}  # a dict\n"
            ),
            [
                "✗ merge of two states of five rows: merge: got a dict; return the tuple (m, ℓ) · stuck? hint(1)",
                (
                    "✗ 16 block states of a row merged from the empty state: merge: got a dict; return the tuple "
                    "(m, ℓ) · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "04_tiling_walkthrough": [
        (
            "partial_output",
            (
                "def partial_output(Q_i, K_seen, V_seen, τ):\n    Q_i *= τ  # in place: Q itself, the first time "
                "the check runs\n    S = Q_i @ K_seen.T\n    P = np.exp(S - S.max(axis=1, keepdims=True))\n    "
                "return (P / P.sum(axis=1, keepdims=True)) @ V_seen\n"
            ),
            [
                ("✓ O_0 after K/V block 0"),
                ("✓ O_1 after K/V block 1"),
            ],
        ),
        (
            "partial_output",
            (
                "def partial_output(Q_i, K_seen, V_seen, τ):\n    Q_i *= τ  # in place: the check run a second "
                "time\n    S = Q_i @ K_seen.T\n    P = np.exp(S - S.max(axis=1, keepdims=True))\n    return (P / "
                "P.sum(axis=1, keepdims=True)) @ V_seen\n"
            ),
            [
                ("✓ O_0 after K/V block 0"),
                ("✓ O_1 after K/V block 1"),
            ],
        ),
        (
            "partial_output",
            (
                "def partial_output(Q_i, K_seen, V_seen, τ):\n    S = τ * Q_i @ K_seen.T\n    P = np.exp(S - "
                "S.max(axis=1, keepdims=True))\n    return ((P / P.sum(axis=1, keepdims=True)) @ "
                "V_seen).astype(np.float16)  # float16\n"
            ),
            [
                (
                    "✗ O_0 after K/V block 0: 4 of 8 values differ; first at index (0, 0): got 0.622559, "
                    "expected 0.622459 — float16's rounding: compute in float64 (NumPy's default) · stuck? "
                    "hint(1)"
                ),
                (
                    "✗ O_1 after K/V block 1: 8 of 8 values differ; first at index (0, 0): got 0.234985, "
                    "expected 0.235004 — float16's rounding: compute in float64 (NumPy's default) · stuck? "
                    "hint(1)"
                ),
            ],
        ),
        (
            "update",
            ("def update(O_i, ℓ_i, m_i, S_ij, V_j):\n    m̃ = S_ij.max(axis=1)  # lines 11 and 12 not written yet\n"),
            [
                (
                    "✗ lines 10–12 for (i = 0, j = 1): got None: your function returns nothing — a `return` "
                    "missing? · stuck? hint(1)"
                ),
                (
                    "✗ lines 10–12 for (i = 1, j = 1): got None: your function returns nothing — a `return` "
                    "missing? · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "05_counting_bytes": [
        (
            "flash2_bytes",
            (
                "def flash2_bytes(N, Nk, d, s, Br, Bc):\n    Tr = -(-N // Br)\n    return s * N * d + Tr * 2 * s "
                "* Nk * d, s * N * d + s * N  # L in s bytes, not float32\n"
            ),
            [
                (
                    "✗ flash2 bytes, N=100 Nk=70 d=16 fp16 Br=32 Bc=16: written: got 3,400 B, expected 3,600 B: "
                    "200 B too few — 1/2 of L (400 B): one pass or block: left out? · stuck? hint(1)"
                ),
                ("✓ flash2 bytes, N=64 Nk=200 d=32 fp32 Br=16 Bc=64"),
            ],
        ),
        (
            "flash2_bytes",
            (
                "def flash2_bytes(N, Nk, d, s, Br, Bc):\n    Tr = np.ceil(N / Br)  # a float64\n    return s * N "
                "* d + Tr * 2 * s * Nk * d, s * N * d + 4 * N\n"
            ),
            [
                (
                    "✗ flash2 bytes, N=100 Nk=70 d=16 fp16 Br=32 Bc=16: read: got 21,120.0 B, a float: the right "
                    "count, but a count is a whole number (// not /?) · stuck? hint(1)"
                ),
                (
                    "✗ flash2 bytes, N=64 Nk=200 d=32 fp32 Br=16 Bc=64: read: got 212,992.0 B, a float: the "
                    "right count, but a count is a whole number (// not /?) · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "06_causal_and_flash2": [
        (
            "blocks_read",
            (
                "def blocks_read(i, N, Nk, Br, Bc):\n    last_key = min((i + 1) * Br, N) - 1 + Nk - N\n    if "
                "last_key < 0:\n        return 0\n    return min(-(-Nk // Bc), last_key // Bc)  # the block of "
                "last_key left out\n"
            ),
            [
                (
                    "✗ blocks read for every Q block, N=100 Nk=100 Br=16 Bc=16: Q block 0: got 0, expected 1 · "
                    "stuck? hint(1)"
                ),
                (
                    "✗ blocks read for every Q block, N=40 Nk=100 Br=16 Bc=32: Q block 0: got 2, expected 3 — "
                    "off by one: < or ≤, rounding up or down? · stuck? hint(1)"
                ),
                (
                    "✗ blocks read for every Q block, N=100 Nk=40 Br=16 Bc=8: Q block 3: got 0, expected 1 · "
                    "stuck? hint(1)"
                ),
            ],
        ),
        (
            "blocks_read",
            (
                "def blocks_read(i, N, Nk, Br, Bc):\n    last_key = min((i + 1) * Br, N) - 1 + Nk - N\n    "
                "return list(range(min(-(-Nk // Bc), last_key // Bc + 1))) if last_key >= 0 else []  # the "
                "blocks, not how many\n"
            ),
            [
                (
                    "✗ blocks read for every Q block, N=100 Nk=100 Br=16 Bc=16: Q block 0: got a list of 1 value "
                    "where one number is expected · stuck? hint(1)"
                ),
                (
                    "✗ blocks read for every Q block, N=40 Nk=100 Br=16 Bc=32: Q block 0: got a list of 3 values "
                    "where one number is expected · stuck? hint(1)"
                ),
                (
                    "✗ blocks read for every Q block, N=100 Nk=40 Br=16 Bc=8: Q block 0: got a list of 0 values "
                    "where one number is expected · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "07_backward_recomputation": [
        (
            "recompute_P",
            ("def recompute_P(S_ij, L_i):\n    S_ij -= L_i[:, None]  # in place\n    return np.exp(S_ij)\n"),
            [
                ("✓ P_ij from S_ij and L_i"),
            ],
        ),
        (
            "recompute_P",
            (
                "def recompute_P(S_ij, L_i):\n    S_ij -= L_i[:, None]  # in place, the check run a second "
                "time\n    return np.exp(S_ij)\n"
            ),
            [
                ("✓ P_ij from S_ij and L_i"),
            ],
        ),
        (
            "backward_bytes",
            (
                "def flash2_backward_bytes(N, d, s, Bc):\n    Tc = -(-N // Bc)\n    read = 3 * s * N * d + 4 * N "
                "+ 2 * s * N * d + Tc * (3 * s * N * d + 8 * N)\n    return read, s * N * d + 2 * s * N * d + Tc "
                "* s * N * d  # read and written apart\n"
            ),
            [
                (
                    "✗ FlashAttention-2 backward bytes: got a tuple of 2 values where one whole number of B is "
                    "expected · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "08_real_gpu": [
        (
            "bench_flops",
            (
                "def bench_flops(n, d, batch, heads, causal):\n    return 4 * n * n * d * batch * heads / (2 if "
                "causal else 1) / 1e12  # in TFLOP\n"
            ),
            [
                (
                    "✗ FLOPs of every benchmark row: row 0 (n=512, d=64): got 0.0687195, expected 6.87195e+10 — "
                    "1e-12 × the expected: a unit prefix (k, M, G, T; m, µ, n) off? · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "09_flash_decoding": [
        (
            "combine",
            (
                "def combine(O_parts, lse_parts):\n    O_parts, lse_parts = O_parts.astype(np.float32), "
                "lse_parts.astype(np.float32)  # float32\n    m = lse_parts.max(axis=0)\n    LSE = m + "
                "np.log(np.exp(lse_parts - m).sum(axis=0))\n    return np.einsum('pn,pnd->nd', np.exp(lse_parts "
                "- LSE), O_parts), LSE\n"
            ),
            [
                (
                    "✗ combine: O and LSE: O: 53 of 64 values differ; first at index (0, 0): got -0.053280208, "
                    "expected -0.053280206 — float32's rounding: compute in float64 (NumPy's default) · stuck? "
                    "hint(1)"
                ),
                (
                    "✗ combine, logits in the hundreds: O: 55 of 64 values differ; first at index (0, 0): got "
                    "0.79243189, expected 0.79243187 — float32's rounding: compute in float64 (NumPy's default) "
                    "· stuck? hint(1)"
                ),
            ],
        ),
        (
            "combine",
            (
                "def combine(O_parts, lse_parts):\n    m = lse_parts.max(axis=0)\n    LSE = m + "
                "np.log(np.exp(lse_parts - m).sum(axis=0))\n    return LSE, (np.exp(lse_parts - LSE)[..., None] "
                "* O_parts).sum(axis=0)  # the wrong order\n"
            ),
            [
                (
                    "✗ combine: O and LSE: O: shape (1,), expected (1, 64) — your LSE holds it: return O, LSE in "
                    "that order · stuck? hint(1)"
                ),
                (
                    "✗ combine, logits in the hundreds: O: shape (1,), expected (1, 64) — your LSE holds it: "
                    "return O, LSE in that order · stuck? hint(1)"
                ),
            ],
        ),
        (
            "combine",
            (
                "def combine(O_parts, lse_parts):\n    m = lse_parts.max(axis=0)\n    LSE = m + "
                "np.log(np.exp(lse_parts - m).sum(axis=0))\n    O_parts *= np.exp(lse_parts - LSE)[..., None]  # "
                "in place\n    return O_parts.sum(axis=0), LSE\n"
            ),
            [
                ("✓ combine: O and LSE"),
                ("✓ combine, logits in the hundreds"),
            ],
        ),
        (
            "combine",
            (
                "def combine(O_parts, lse_parts):\n    LSE = np.logaddexp.reduce(lse_parts, axis=0)  # a loop "
                "over the parts\n    O = 0\n    for o, lse in zip(O_parts, lse_parts):\n        O = O + "
                "np.exp(lse - LSE)[:, None] * o\n    return O, LSE\n"
            ),
            [
                ("✓ combine: O and LSE"),
                ("✓ combine, logits in the hundreds"),
            ],
        ),
    ],
    "10_below_hbm": [
        (
            "dram_fits",
            ("def dram_read_when_it_fits(n, d, s, heads):\n    read = 3 * n * d * s * heads  # never returned\n"),
            [
                (
                    "✗ DRAM read, N = 4096, d = 128, 32 heads: got None: your function returns nothing — a "
                    "`return` missing? · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "11_llm_attention": [
        (
            "padded_rows",
            (
                "def padded_rows(lengths):\n    return [max(lengths) - n for n in lengths]  # each sequence's "
                "padding, not their sum\n"
            ),
            [
                (
                    "✗ padded rows of the small batch: got a list of 3 values where one whole number of rows is "
                    "expected · stuck? hint(1)"
                ),
                (
                    "✗ padded rows of the long-tailed batch: got a list of 64 values where one whole number of "
                    "rows is expected · stuck? hint(1)"
                ),
            ],
        ),
    ],
    "12_beyond_one_gpu": [
        (
            "schedule",
            ("def schedule(P):\n    held = [[(p - t) % P for p in range(P)] for t in range(P)]  # never returned\n"),
            [
                (
                    "✗ schedule of 5 devices: got None: your function returns nothing — a `return` missing? · "
                    "stuck? hint(1)"
                ),
                (
                    "✗ schedule of 8 devices: got None: your function returns nothing — a `return` missing? · "
                    "stuck? hint(1)"
                ),
            ],
        ),
        (
            "schedule",
            ("def schedule(P):\n    return [[(p - t) % P for t in range(P)] for p in range(P)]  # held[p][t]\n"),
            [
                (
                    "✗ schedule of 5 devices: your answer is the expected transposed: its rows are the "
                    "expected's columns · stuck? hint(1)"
                ),
                (
                    "✗ schedule of 8 devices: your answer is the expected transposed: its rows are the "
                    "expected's columns · stuck? hint(1)"
                ),
            ],
        ),
        (
            "schedule",
            (
                "def schedule(P):\n    t, p = np.meshgrid(np.arange(P), np.arange(P), indexing='ij')\n    return "
                "(p - t) % P  # an array\n"
            ),
            [
                ("✓ schedule of 5 devices"),
                ("✓ schedule of 8 devices"),
            ],
        ),
        (
            "zigzag",
            (
                "def zigzag(N, P):\n    c = N // (2 * P)\n    return (((p * c, (p + 1) * c), ((2 * P - 1 - p) * "
                "c, (2 * P - p) * c)) for p in range(P))  # a generator\n"
            ),
            [
                ("✓ zigzag, N = 64, P = 4"),
                ("✓ zigzag, N = 48, P = 3"),
            ],
        ),
    ],
    "13_inside_the_sm": [
        (
            "sectors_touched",
            (
                "def sectors_touched(addresses, width):\n    return {s for a in addresses.tolist() for s in "
                "range(a // 32, (a + width - 1) // 32 + 1)}  # the set\n"
            ),
            [
                (
                    "✗ sectors of four warp accesses: consecutive words: got a set of 4 values where one number "
                    "is expected · stuck? hint(1)"
                ),
            ],
        ),
        (
            "bank_wavefronts",
            (
                "def bank_wavefronts(addresses):\n    return np.bincount(list({w % 32 for w in (addresses // "
                "4).tolist()}), minlength=32)  # every bank's count\n"
            ),
            [
                (
                    "✗ wavefronts of five shared-memory accesses: consecutive words: got an array of shape (32,) "
                    "where one number is expected · stuck? hint(1)"
                ),
            ],
        ),
        (
            "copy_ratio",
            (
                "def copy_ratio(row_bytes, pad):\n    return (row_bytes + pad) % 32 == 16  # the condition, not "
                "the ratio\n"
            ),
            [
                (
                    "✗ L2 → SM per byte asked, five paddings: 128 B rows, no padding: got False, a bool, where a "
                    "number is expected — a comparison returned, not the value? · stuck? hint(1)"
                ),
            ],
        ),
    ],
}
