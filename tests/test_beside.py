"""gpu.lab.beside: sources cut at the paper's line numbers, and the two listings lined up row by row."""

from pathlib import Path

import sim.algorithms.flash2 as flash2_listing
from gpu.lab import beside

KERNELS = Path(beside.__file__).parents[1] / "kernels"

PY = """\
def forward(chip, N):
    Tr = N // 2  # line 1: Q in Tr blocks
    for i in range(Tr):  # line 3
        with chip.step("load", 4, "Load Q_i", i=i):
            Q_i = chip.load("Q_i", "Q")
            x = 1  # as Algorithm 4, line 18: inside a step, so part of it
        with chip.step(
            "compute",
            None,
            "no paper line",
        ):
            y = 2
        with open("f") as fh:  # lines 5–6 in a comment on an ordinary with
            pass
"""

CU = """\
// header: Line numbers are those of Algorithm 1; line by line
#define X 1
__global__ void k() {
    // line 4: load Q_i
    Q_i[e] = Q[e];
    // line 12: O_i = diag(ℓ_i)^−1 O_i
    // line 14: write O_i
    O[e] = O_i[e];
    int unmarked = 0;  // summed at line 12 (a trailing comment names no section)
    // line 9: m_i and
    //         ℓ_i, one thread per row
    m = 1;
}
"""


def test_python_sections_follow_steps_and_line_comments():
    got = [(s.lines, s.first, s.code.splitlines()[0]) for s in beside.python_sections(PY)]
    assert got == [
        ((1,), 2, "Tr = N // 2  # line 1: Q in Tr blocks"),
        ((3,), 3, "for i in range(Tr):  # line 3"),
        ((4,), 4, 'with chip.step("load", 4, "Load Q_i", i=i):'),
        ((5, 6), 13, 'with open("f") as fh:  # lines 5–6 in a comment on an ordinary with'),
    ]
    with_step = beside.python_sections(PY)[2].code.splitlines()
    assert with_step[1:] == [  # the whole block, dedented
        '    Q_i = chip.load("Q_i", "Q")',
        "    x = 1  # as Algorithm 4, line 18: inside a step, so part of it",
    ]


def test_cuda_sections_run_from_one_marked_comment_to_the_next():
    sections = beside.cuda_sections(CU)
    assert [(s.lines, s.first) for s in sections] == [((4,), 4), ((12, 14), 6), ((9,), 10)]
    assert sections[1].code.splitlines()[-2:] == [
        "O[e] = O_i[e];",
        "int unmarked = 0;  // summed at line 12 (a trailing comment names no section)",
    ]
    assert sections[2].code.splitlines()[-1] == "}"


def test_side_by_side_groups_what_one_side_does_together():
    left = (
        "sim",
        "python",
        [beside.Section((12,), 1, "a"), beside.Section((14,), 5, "b"), beside.Section((3,), 9, "c")],
    )
    right = ("cu", "cuda", [beside.Section((12, 14), 1, "x")])
    table = beside.side_by_side(left, right)
    assert [c.header for c in table.columns] == ["paper line", "sim", "cu"]
    assert list(table.columns[0].cells) == ["3", "12, 14"]
    assert list(beside.side_by_side(left, right, only={3}).columns[0].cells) == ["3"]


def test_the_shipped_listings_line_up():
    """Every paper line the readable kernel marks has simulator code beside it, in the same row."""
    kernel = sorted(KERNELS.glob("*readable*.cu"))[0]
    py = beside.python_sections(Path(flash2_listing.__file__).read_text())
    cu = beside.cuda_sections(kernel.read_text())
    assert len(cu) >= 5, f"{kernel.name}: expected its `// line N` comments"
    table = beside.side_by_side(("sim", "python", py), ("cu", "cuda", cu))
    rows = zip(table.columns[0].cells, table.columns[1].cells, table.columns[2].cells, strict=True)
    for label, sim_cell, cu_cell in rows:
        if cu_cell != "":
            assert sim_cell != "", f"paper line {label}: the kernel has code, the simulator none"
    kernel_lines = {str(n) for s in cu for n in s.lines}
    labelled = {n for label in table.columns[0].cells for n in label.split(", ")}
    assert kernel_lines <= labelled
