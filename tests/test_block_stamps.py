"""gpu.lab.block_stamps (the stamped kernels, their stamps, the schedule a replay plays) and gpu.lab.l2_capacity's
table, on the CPU: sources patched and compiled, stamps and ncu rows made by hand (run 41-dram12)."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpu import registry, source
from gpu.lab import block_stamps, l2_capacity
from sim.machine import grids

NVCC = shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc") if Path(p).exists()), None
)
BUILDS = [  # the builds a full call at block_stamps.SHAPE runs (WALK off: no causal walk; rung 7 as gpu/backward.py)
    (registry.FORWARD[6], {"WALK": 0}),
    (registry.BACKWARD[7], {"DETERMINISTIC": 0, "FUSED_DQ": 0}),
]


def _render(spec, extra):
    s = block_stamps.SHAPE
    return source.render(spec.file, spec.defines(s["d"], "float16", spec.tiles_for(s["d"], s["n"], False)) | extra)


@pytest.mark.parametrize("spec, extra", BUILDS, ids=["rung6", "rung7"])
def test_each_place_gets_one_stamp_before_its_line(spec, extra):
    text = _render(spec, extra)
    patched = block_stamps.patch(spec.file, text)
    assert patched.startswith(block_stamps.HEADER)
    for line, added in block_stamps.PLACES[spec.file]:
        assert patched.count(added + line) == 1
    assert patched.count("stamp(") == 1 + len(block_stamps.PLACES[spec.file])  # the definition and each call


def test_a_file_without_places_is_left_alone_and_a_lost_line_stops_the_probe():
    assert block_stamps.patch("05_flash2_backward_mma.cu", "int x;\n") == "int x;\n"
    with pytest.raises(SystemExit, match="exactly one line"):
        block_stamps.patch("06_flash2_wgmma_tma.cu", "int x;\n")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("spec, extra", BUILDS, ids=["rung6", "rung7"])
def test_the_stamped_builds_compile(tmp_path, spec, extra):
    cu = tmp_path / "k.cu"
    cu.write_text(block_stamps.patch(spec.file, _render(spec, extra)))
    run = subprocess.run([NVCC, "-ptx", "-arch=sm_90a", "--std=c++17", str(cu), "-o", str(tmp_path / "k.ptx")],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "%globaltimer" in (tmp_path / "k.ptx").read_text()


def _stamps(entries: dict[int, tuple[int, int, int, int]]) -> np.ndarray:
    """A stamp array with {slot: (time, smid, a, b)} written as the kernels write them."""
    out = np.zeros(2 * block_stamps.SLOTS, np.uint64)
    for slot, (t, sm, a, b) in entries.items():
        out[2 * slot], out[2 * slot + 1] = t, (sm << 48) | (a << 24) | b
    return out


def test_stamps_decode_to_slot_time_sm_and_place():
    slot, t, sm, a, b = block_stamps.decoded(_stamps({3: (1000, 131, 127, 255), 7: (5, 0, 0, 1)}))
    assert slot.tolist() == [3, 7] and t.tolist() == [1000, 5]
    assert sm.tolist() == [131, 0] and a.tolist() == [127, 0] and b.tolist() == [255, 1]


def test_a_backward_blocks_steps_spread_between_its_start_and_end():
    # N = Nk = 128, Br = Bc = 64, one head: two blocks (K/V blocks 0, 1), each Q block 0, Q block 1, then dK, dV
    main = grids.flash2_backward(128, 128, 64, 2, 64, 64, False, 1)[1]
    stamps = _stamps({0: (100, 0, 0, 0), 1: (300, 0, 0, 0), 2: (150, 1, 0, 1), 3: (250, 1, 0, 1)})
    events = block_stamps.schedule(main, stamps, backward=True)
    assert [(t, x) for t, x, _ in events] == [(100, 0), (150, 1), (200, 0), (200, 1), (250, 1), (300, 0)]
    assert events[-1][2] == [(("dKdV", 0, 0), 2 * 2 * 64 * 64, "w")]


def test_a_persistent_blocks_tiles_run_from_stamp_to_stamp():
    # N = 256, Nk = 128, Br = Bc = 64, two blocks: block 0 tiles 0 and 2, block 1 tiles 1 and 3, each 2 K/V steps
    # and its store; a last tile lasts the block's median tile
    kernel = grids.flash2_forward(256, 128, 64, 2, 64, 64, heads=1, sms=2)
    stamps = _stamps({0: (1, 0, 0, 0), 1: (31, 0, 0, 2), 256: (5, 1, 0, 1), 257: (50, 1, 0, 3)})
    times = sorted((t, x) for t, x, _ in block_stamps.schedule(kernel, stamps, backward=False))
    block0 = [1, 11, 21, 31, 41, 51]
    block1 = [5, 20, 35, 50, 65, 80]
    assert times == sorted([(t, 0) for t in block0] + [(t, 1) for t in block1])


def test_a_ticketed_blocks_tiles_are_the_ones_its_stamps_name():
    # the kernel as the static walk deals it (block 0 tiles 0, 2; block 1 tiles 1, 3), the stamps as tickets gave
    # them: block 0 took tiles 0, 2 and 3 (30 ns apart), block 1 tile 1 alone, lasting every block's median tile (30)
    kernel = grids.flash2_forward(256, 128, 64, 2, 64, 64, heads=1, sms=2)
    stamps = _stamps({0: (1, 0, 0, 0), 1: (31, 0, 0, 2), 2: (61, 0, 0, 3), 256: (5, 1, 0, 1)})
    events = block_stamps.schedule(kernel, stamps, backward=False)
    firsts = {(t, x): step[0][0] for t, x, step in events if step and step[0][0][0] == "Q"}
    assert firsts == {(1, 0): ("Q", 0, 0), (31, 0): ("Q", 0, 2), (61, 0): ("Q", 0, 3), (5, 1): ("Q", 0, 1)}
    assert sorted(t for t, x, _ in events if x == 1) == [5, 15, 25]  # 2 K/V steps and the store, 10 ns each
    assert sorted(t for t, x, _ in events if x == 0) == [1, 11, 21, 31, 41, 51, 61, 71, 81]


def test_the_capacity_table_counts_misses_a_pass_after_the_first(capsys, tmp_path):
    lines = ['"ID","Kernel Name","Metric Name","Metric Value"']
    plan = [(mode, mib) for mode in l2_capacity.MODES for mib in l2_capacity.SIZES]
    for n, (mode, mib) in enumerate(plan):
        misses = 0.25 if (mode, mib) == ("shared_reads", 26) else 0.0
        read = (mib + (l2_capacity.PASSES - 1) * mib * misses) * 2**20
        lines += [
            f'"{n}","{mode}(x)","dram__bytes_read.sum","{read:.0f}"',
            f'"{n}","{mode}(x)","dram__bytes_write.sum","0"',
        ]
    path = tmp_path / "ncu.csv"
    path.write_text("\n".join(lines) + "\n")
    l2_capacity.table(str(path))
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(rows) == len(plan)
    assert [float(r[4]) for r in rows if r[:2] == ["shared_reads", "26"]] == [0.25]
    assert sum(float(r[4]) for r in rows) == 0.25
