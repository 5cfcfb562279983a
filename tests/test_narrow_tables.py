"""Every table the CLI prints without a GPU reads at 80 columns, the width of a pipe: no line is wider, nothing is cut
with "…", no word or number is broken across lines and no header stacks more than two lines. (Text outside the
tables wraps between words; a line printed whole on purpose, such as a path, may be wider.)"""

import re
import shlex

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from sim.cli import app

COMMANDS = [
    "run --n 256",
    "run --n 256 --backward",
    "run --n 2048 --backward --counts-only",
    "run --n 256 --window 64,0 --causal",
    "run --n 64 --d 128 --heads 32 --kv-heads 4 --pack-gqa",
    "run --seqlens 100,200,37 --backward",
    "decode --nk 4096",
    "decode --nk 4096 --queries 4 --page-size 16",
    "ring --n 256",
    "ring --devices 8 --n 131072 --d 128 --heads 32 --causal --sharding zigzag --counts-only",
    "ring --n 256 --scheme ulysses",
    "walkthrough",
    "paper fig2",
    "assignments list",
    "lessons list",
    "trace --n 8",
    "sweep",
    "sweep --backward --n 512,1024,2048",
]


def flashsim(command: str, width: int) -> str:
    result = CliRunner().invoke(app, shlex.split(command), env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


def words(lines: list[str]) -> set[str]:
    return {w for line in lines for w in re.split(r"[\s│┃━╇]+", line) if w}


def header_heights(lines: list[str]) -> list[int]:
    """For each table, how many lines its header takes (the lines with ┃ above the ━╇━ rule)."""
    heights = []
    for at, line in enumerate(lines):
        if "╇" in line:
            above = 0
            while at - above - 1 >= 0 and "┃" in lines[at - above - 1]:
                above += 1
            heights.append(above)
    return heights


@pytest.mark.parametrize("command", COMMANDS)
def test_every_table_reads_at_80_columns(command):
    narrow = flashsim(command, 80).splitlines()
    tables = [line for line in narrow if "│" in line or "┃" in line]
    assert max(map(cell_len, tables), default=0) <= 80 and not [line for line in narrow if "…" in line]
    broken = words(tables) - words(flashsim(command, 200).splitlines())  # a piece of a word is no word of the wide one
    assert not broken, f"broken across lines at 80 columns: {sorted(broken)}\n" + "\n".join(narrow)
    assert all(h <= 2 for h in header_heights(narrow)), "\n".join(narrow)


def test_decode_names_its_columns_and_rows_whole_at_80_columns():
    lines = [" ".join(line.split()) for line in flashsim("decode --nk 4096", 80).splitlines()]
    assert any("SMs busy" in line for line in lines) and any("(of 108)" in line for line in lines)
    assert "1 split: FlashAttention-2, one thread block per (batch, head)" in lines
    assert any(line.startswith("6* │ 96 │ 96 │ 1 │ 89% │ 33.7 MB │ 30.4 µs │ 5.0×") for line in lines)
