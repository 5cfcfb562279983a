"""Reference solutions of lesson 1, The memory wall: each block replaces the exercise cell of its name (and
runs in the notebook, with its imports: hardware, itemsize)."""


# %% exercise:attainable
def attainable(I: float, hw: hardware.Hardware, dtype: str) -> float:
    # FLOP/s attainable at intensity I: limited by the peak, or by how fast HBM delivers the bytes
    return min(hw.peak(dtype), I * hw.hbm_bandwidth)


# %% exercise:smallest_compute_bound_matmul
def smallest_compute_bound_matmul(hw: hardware.Hardware, dtype: str) -> int:
    # 2n³ / peak > 3·s·n² / bandwidth  ⇔  n > 3·s·peak / (2·bandwidth) = 1.5·s·I*
    return int(1.5 * itemsize(dtype) * hw.peak(dtype) / hw.hbm_bandwidth) + 1
