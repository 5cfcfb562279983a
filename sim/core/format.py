"""The one set of formatters every renderer uses: bytes, counts, ratios, times, rates."""

import math


def human_bytes(n: float) -> str:
    """Memory sizes (SRAM, memory a command needs, files) in binary units, short: 512 B, 16.0 KiB, 2.5 MiB, 1,000.0
    KiB, 1,866.3 TiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024


def exact_bytes(n: int) -> str:
    """A memory size, exact with thousands separators below 1 MiB (1,248 B), else in MiB or GiB to 2 decimals."""
    if n < 2**20:
        return f"{n:,} B"
    return f"{n / 2**20:,.2f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


def bytes_and_units(n: int) -> str:
    """An SRAM size or need, exact, with binary units beside it from 1 KiB on: 84 B, 166,912 B (163.0 KiB)."""
    return f"{n:,} B" if n < 1024 else f"{n:,} B ({human_bytes(n)})"


def exact_decimal_bytes(n: int) -> str:
    """Bytes moved, exact with thousands separators below 1 MB = 10⁶ B (1,248 B), else in MB or GB to 2 decimals."""
    if n < 10**6:
        return f"{n:,} B"
    return f"{n / 10**6:,.2f} MB" if n < 10**9 else f"{n / 10**9:,.2f} GB"


def decimal_bytes(n: float) -> str:
    """Bytes moved and HBM capacities in decimal units, as the paper and datasheets write them: 1.5 GB = 1.5·10⁹ B."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000


def count(n: int) -> str:
    """An integer with thousands separators."""
    return f"{n:,}"


def plural(n: int, noun: str) -> str:
    """A count and its noun, singular for 1: 1 key, 200,000 pages."""
    return f"{n:,} {noun}" + "s" * int(n != 1)  # (a NumPy integer's != is a NumPy bool, which * refuses)


def seconds(t: float) -> str:
    """A duration: milliseconds below a second, else seconds, to three significant digits."""
    return f"{t * 1e3:,.3g} ms" if t < 1 else f"{t:,.3g} s"


def short_time(t: float) -> str:
    """A duration that may be tiny: microseconds below a millisecond (3.15 µs), else as `seconds`."""
    return f"{t * 1e6:,.3g} µs" if t < 1e-3 else seconds(t)


def duration(t: float) -> str:
    """A rough duration, for an estimate: 40 s, 3 min, 2.5 h, 12 days, 618 years."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if t >= 2 * size if unit in ("years", "days") else t >= size:
            return f"{t / size:,.2g} {unit}" if t < 10 * size else f"{t / size:,.0f} {unit}"
    return f"{t:.2g} s" if t < 10 else f"{t:.0f} s"


def number(x: float, decimals: int = 3) -> str:
    """A value to `decimals` places, ∞ for infinities."""
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    return f"{x:.{decimals}f}"


def fixed(x: float, decimals: int) -> str:
    """A value to `decimals` places with thousands separators (1,234.5): GFLOP, GB/s, µs in a column that names them."""
    return f"{x:,.{decimals}f}"


def ratio(x: float, decimals: int = 1) -> str:
    """How many times as much: 7.4×."""
    return f"{x:.{decimals}f}×"


def more_or_fewer(x: float, decimals: int = 1) -> str:
    """How another amount compares with this one, x = other / this: `7.4× more`, or `1.4× fewer` when x < 1."""
    return f"{ratio(x, decimals)} more" if x >= 1 else f"{ratio(1 / x, decimals)} fewer"


def percent(part: float, whole: float = 1) -> str:
    """A share of a whole in whole percent: 37%."""
    return f"{100 * part / whole:.0f}%"


def tflops(x: float, decimals: int | None = None) -> str:
    """A rate in TFLOP/s: one decimal below 100, none from 100 on (2.9, 57.1, 296), or `decimals` places."""
    if decimals is None:
        decimals = 1 if x < 100 else 0
    return f"{x:.{decimals}f}"


def abs_error(x: float, digits: int = 3) -> str:
    """A max |x − reference| in scientific notation with `digits` decimals: 4.877e-04."""
    return f"{x:.{digits}e}"


def at_most(x: float, digits: int = 3) -> str:
    """x to `digits` significant digits, rounded toward zero: a limit that, typed back, is still within it
    (9.8149e34 → 9.81e+34, never 9.82e+34)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    exponent = math.floor(math.log10(abs(x))) - digits + 1
    mantissa = math.trunc(x / 10.0**exponent)
    while abs(mantissa * 10.0**exponent) > abs(x):  # the division rounded up
        mantissa -= 1 if mantissa > 0 else -1
    return f"{mantissa * 10.0**exponent:.{digits - 1}e}"
