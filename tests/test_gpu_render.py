"""The benchmark's table renderers, on a hand-made report (no GPU needed)."""

from gpu.render import BENCH_COLUMNS, bench_markdown


def test_markdown_table_cells_come_from_the_report():
    report = {
        "device": {"name": "Test GPU"},
        "torch": None,
        "notes": ["a note"],
        "rows": [
            {
                "n": 4096, "d": 64, "causal": True, "dtype": "bfloat16",
                "v2": {"tflops": 300.0, "peak_extra_bytes": 64 * 2**20},
                "sdpa": {"tflops": 250.0, "peak_extra_bytes": 64 * 2**20},
                "standard": {"status": "OOM", "needs_bytes": 10**12},
                "v1": {"status": "skipped"},
            }
        ],
    }  # fmt: skip
    lines = bench_markdown(report).splitlines()
    assert lines[0] == "# `flashsim bench gpu` on Test GPU" and "- a note" in lines
    header, rule, row = lines[-3:]
    assert header.strip("| ").split(" | ") == list(BENCH_COLUMNS)
    assert rule == "|" + "---|" * len(BENCH_COLUMNS)
    cells = row.strip("| ").split(" | ")
    assert cells == [
        "bf16",
        "64",
        "yes",
        "4096",
        "300",
        "250",
        "1.20",
        "OOM",
        "—",
        "skipped",
        "64.0 MiB",
        "64.0 MiB",
        "OOM",
    ]
