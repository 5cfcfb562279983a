"""The formatters every renderer prints through, against strings written out by hand."""

import pytest

from sim.core import format as fmt


@pytest.mark.parametrize(
    ("value", "decimals", "text"),
    [(1234.5, 1, "1,234.5"), (0.5, 0, "0"), (1.5, 0, "2"), (2_412_345.678, 2, "2,412,345.68"), (7.0, 3, "7.000")],
)
def test_fixed_rounds_half_to_even_and_separates_thousands(value, decimals, text):
    assert fmt.fixed(value, decimals) == text


def test_ratio_writes_how_many_times():
    assert fmt.ratio(136_314_880 / 18_366_464) == "7.4×"
    assert fmt.ratio(824.6 / 962.1, 2) == "0.86×"


def test_percent_of_a_whole_and_of_one():
    assert fmt.percent(208, 1024) == "20%"
    assert fmt.percent(0.148) == "15%" and fmt.percent(1.0) == "100%"


@pytest.mark.parametrize(
    ("rate", "text"), [(2.94, "2.9"), (57.15, "57.1"), (99.94, "99.9"), (100.0, "100"), (295.6, "296")]
)
def test_tflops_has_one_decimal_below_100_and_none_above(rate, text):
    assert fmt.tflops(rate) == text


def test_tflops_with_fixed_decimals():
    assert fmt.tflops(894.31, 1) == "894.3" and fmt.tflops(312.0, 0) == "312"


def test_abs_error_in_scientific_notation():
    assert fmt.abs_error(4.877e-4) == "4.877e-04"
    assert fmt.abs_error(7.3368e-6, 2) == "7.34e-06" and fmt.abs_error(0.0, 1) == "0.0e+00"


@pytest.mark.parametrize(
    ("n", "text"),
    [(999, "999 B"), (131_072, "131.1 kB"), (2_363_392, "2.4 MB"), (80 * 10**9, "80.0 GB"), (2 * 10**12, "2.0 TB")],
)
def test_decimal_bytes_count_in_powers_of_1000(n, text):  # 2,363,392 / 10⁶ = 2.363392
    assert fmt.decimal_bytes(n) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (999_999, "999,999 B"),  # exact below 10⁶, where exact_bytes would say 976.56 KiB only above 2²⁰
        (10**6, "1.00 MB"),
        (2**20, "1.05 MB"),  # 1,048,576 / 10⁶
        (2_363_392, "2.36 MB"),
        (999_990_000, "999.99 MB"),
        (12_345_678_901, "12.35 GB"),  # 12,345,678,901 / 10⁹ = 12.345…
        (2_400 * 10**9, "2,400.00 GB"),
    ],
)
def test_exact_decimal_bytes_is_exact_below_a_megabyte_then_mb_or_gb(n, text):
    assert fmt.exact_decimal_bytes(n) == text


def test_memory_sizes_stay_binary():  # the README's units: SRAM and memory held in KiB, MiB, GiB
    assert fmt.exact_bytes(2**20) == "1.00 MiB" and fmt.exact_bytes(999_999) == "999,999 B"
    assert fmt.human_bytes(163 * 1024) == "163.0 KiB"


@pytest.mark.parametrize(
    ("n", "text"),
    [(1000, "1,000 B"), (1000.5 * 2**10, "1,000.5 KiB"), (1866.3 * 2**40, "1,866.3 TiB"), (2**60, "1,048,576.0 TiB")],
)
def test_human_bytes_separates_thousands(n, text):  # was "1000 B", "1866.3 TiB"
    assert fmt.human_bytes(n) == text


def test_decimal_bytes_separates_thousands_of_terabytes():
    assert fmt.decimal_bytes(2_400 * 10**12) == "2,400.0 TB"


def test_bytes_and_units_gives_the_units_only_where_they_say_more():
    assert fmt.bytes_and_units(84) == "84 B" and fmt.bytes_and_units(1023) == "1,023 B"
    assert fmt.bytes_and_units(166_912) == "166,912 B (163.0 KiB)"
