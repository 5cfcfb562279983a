"""The walls around a submission: found by a probe, named in one line, refused or said plainly when missing; the
seccomp filter's verdicts read by an interpreter of classic BPF written here; the harness's allow-list."""

import csv
import json
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from sim.cli import app
from sim.core.errors import InputError
from sim.grading import allowlist, csvfile, grader, isolation, spec
from sim.grading.confine import landlock, seccomp

ROOT = Path(__file__).resolve().parent.parent
MASTER = spec.locate("02")
ONE_TEST = replace(spec.load(MASTER), tests=spec.load(MASTER).tests[:1])
walls_here = pytest.mark.skipif(landlock.abi() == 0 or not seccomp.available(), reason="needs Landlock and seccomp")

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | 1, 0x00050000 | 38
# From the kernel's tables (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h)
X86_64 = dict(arch=0xC000003E, read=0, clone=56, fork=57, execve=59, kill=62, socket=41, socketpair=53,
              tgkill=234, prlimit64=302, clone3=435, ptrace=101, process_vm_readv=310)  # fmt: skip
AARCH64 = dict(arch=0xC00000B7, read=63, clone=220, fork=None, execve=221, kill=129, socket=198, socketpair=199,
               tgkill=131, prlimit64=261, clone3=435, ptrace=117, process_vm_readv=270)  # fmt: skip


def verdict(code, nr: int, arch: int, args=(0, 0, 0, 0, 0, 0)) -> int:
    """Run a classic BPF program on struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]} (little-endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    pc, a = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            a, pc = struct.unpack_from("<I", data, k)[0], pc + 1
        elif op in (0x15, 0x35, 0x45):  # BPF_JMP | JEQ, JGE, JSET with a constant
            taken = a == k if op == 0x15 else a >= k if op == 0x35 else bool(a & k)
            pc += 1 + (jt if taken else jf)
        elif op == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected BPF instruction {op:#x}")


@pytest.mark.parametrize("machine, n", [("x86_64", X86_64), ("aarch64", AARCH64)])
def test_the_seccomp_filter_refuses_what_it_must_and_lets_a_thread_start(monkeypatch, machine, n):
    monkeypatch.setattr(seccomp, "MACHINE", machine)
    me, code = 4242, seccomp.program(4242)
    arch = n["arch"]
    assert verdict(code, n["read"], arch) == ALLOW
    assert verdict(code, n["read"], 0x40000003) == KILL  # i386's arch value: another table, killed
    assert verdict(code, n["clone"], arch, (0x3D0F00, 0, 0, 0, 0, 0)) == ALLOW  # pthread_create's flags
    assert verdict(code, n["clone"], arch, (0x1200011, 0, 0, 0, 0, 0)) == EPERM  # fork()'s flags
    assert verdict(code, n["clone3"], arch) == ENOSYS  # so the C library falls back to clone
    assert verdict(code, n["execve"], arch) == verdict(code, n["ptrace"], arch) == EPERM
    assert verdict(code, n["process_vm_readv"], arch, (me, 0, 0, 0, 0, 0)) == EPERM
    assert verdict(code, n["kill"], arch, (me, 9, 0, 0, 0, 0)) == ALLOW
    assert verdict(code, n["kill"], arch, (1, 9, 0, 0, 0, 0)) == EPERM
    assert verdict(code, n["kill"], arch, (0, 9, 0, 0, 0, 0)) == EPERM  # its process group
    assert verdict(code, n["kill"], arch, ((-me) & 0xFFFFFFFF, 9, 0, 0, 0, 0)) == EPERM
    assert verdict(code, n["tgkill"], arch, (me, me, 6, 0, 0, 0)) == ALLOW  # raise() and abort()
    assert verdict(code, n["tgkill"], arch, (me + 1, me + 1, 6, 0, 0, 0)) == EPERM
    assert verdict(code, n["prlimit64"], arch, (0, 7, 0, 0, 0, 0)) == ALLOW
    assert verdict(code, n["prlimit64"], arch, (me + 1, 7, 0, 0, 0, 0)) == EPERM
    assert verdict(code, n["socket"], arch, (1, 1, 0, 0, 0, 0)) == EPERM  # even AF_UNIX: pathname sockets
    assert verdict(code, n["socketpair"], arch, (1, 1, 0, 0, 0, 0)) == ALLOW
    assert verdict(code, n["socketpair"], arch, (2, 1, 0, 0, 0, 0)) == EPERM
    if n["fork"] is not None:
        assert verdict(code, n["fork"], arch) == EPERM
    if machine == "x86_64":
        assert verdict(code, 0x40000000 | n["read"], arch) == KILL  # the x32 table


@walls_here
def test_the_isolation_line_names_the_layers_that_held_here():
    walls = grader.isolate(ONE_TEST, [MASTER])
    line = walls.line()
    assert f" landlock ABI {landlock.abi()} (files" in line and line.startswith("isolation: ")
    assert " · seccomp · " in line and line.endswith(" · rlimits") and not walls.weak
    assert walls.settings["without"] == []
    if landlock.abi() >= 4:
        assert "tcp" in line


@pytest.mark.parametrize("layer", ["landlock", "seccomp"])
def test_a_missing_kernel_layer_refuses_grading_unless_allowed(monkeypatch, layer):
    monkeypatch.setattr(isolation, "WITHOUT", frozenset({layer}))
    with pytest.raises(InputError, match=f"cannot confine submissions \\(no {layer}.*--allow-weak-isolation"):
        grader.isolate(ONE_TEST, [MASTER])
    assert grader.isolate(ONE_TEST, [MASTER], self_check=True).missing == (layer,)  # a student's laptop: a warning


def test_without_namespaces_the_grader_only_warns_and_the_child_still_has_the_kernel_walls(monkeypatch):
    monkeypatch.setattr(isolation, "WITHOUT", frozenset({"namespaces"}))
    walls = grader.isolate(ONE_TEST, [MASTER])
    assert "namespaces" not in walls.line() and walls.missing == ()
    (report,) = grader.grade(ONE_TEST, [MASTER], seed=1, walls=walls)
    assert report.score == 10 and report.notes == []


def test_weak_mode_says_so_in_every_report_and_the_csv(monkeypatch, tmp_path):
    monkeypatch.setattr(isolation, "WITHOUT", frozenset({"landlock", "seccomp"}))
    walls = grader.isolate(ONE_TEST, [MASTER], allow_weak=True)
    assert walls.line().endswith("— graded without kernel isolation (no landlock or seccomp)")
    (report,) = grader.grade(ONE_TEST, [MASTER], seed=1, walls=walls)
    assert report.score == 10 and report.notes == ["graded without kernel isolation"]
    csvfile.write([report], tmp_path / "g.csv", [t["name"] for t in ONE_TEST.tests])
    (row,) = csv.DictReader(open(tmp_path / "g.csv", encoding="utf-8"))
    assert row["notes"] == "graded without kernel isolation" and row["score"] == "10"


def test_the_cli_refuses_in_one_line_and_goes_on_with_allow_weak_isolation(monkeypatch, tmp_path):
    monkeypatch.setattr(isolation, "WITHOUT", frozenset({"seccomp"}))
    refused = CliRunner().invoke(app, ["grade", str(MASTER), str(MASTER), "--seed", "1"])
    assert refused.exit_code == 2 and "cannot confine submissions (no seccomp" in refused.output
    assert "Traceback" not in refused.output
    out = CliRunner().invoke(app, ["grade", str(MASTER), str(MASTER), "--seed", "1", "--allow-weak-isolation"])
    assert "graded without kernel isolation (no seccomp)" in out.output and "isolation: " in out.output


def test_import_sim_loads_nothing_and_the_harness_only_its_allow_list():
    probe = "import sys, json, sim; first = sorted(sys.modules); import sim.grading.harness; print(json.dumps([first, sorted(sys.modules)]))"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); {probe}"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    first, after = json.loads(out.stdout)
    assert [m for m in first if m == "sim" or m.startswith("sim.")] == ["sim"] and "numpy" not in first
    assert sorted(m for m in after if m == "sim" or m.startswith("sim.")) == sorted(allowlist.HARNESS_MODULES)


def test_the_read_set_is_refused_where_it_reaches_a_forbidden_path():
    listing = (
        ROOT / "sim" / "machine" / "memory.py"
    )  # a file the harness needs, named forbidden: the grader must refuse
    with pytest.raises(InputError, match=r"reaches .*memory\.py; refusing to grade"):
        allowlist.read_set("chip", [str(listing)])
    reads = allowlist.read_set("chip", [str(ROOT / "sim" / "algorithms"), str(ROOT / "sim" / "api")])
    assert not any(Path(p).is_relative_to(ROOT / "sim" / "algorithms") for p in reads.paths)
    venv = Path(sys.prefix).resolve()  # CI's virtual environment lives inside the repository: NumPy's, not ours
    ours = [p for p in reads.paths if Path(p).is_relative_to(ROOT) and not Path(p).is_relative_to(venv)]
    assert sorted(Path(p).name for p in ours) == sorted(
        Path(f).name for f in reads.modules.values()
    )  # of the repository, only the harness's files


def test_the_gpu_drivers_read_set_is_within_its_allow_list():
    # the gpu package's launchers read the machine model (decode's occupancy, the variants' masks): run 34 found a
    # GPU grade refused for them; the read set is worked out on the CPU too (no CuPy needed to import the launchers)
    forbidden = [ROOT / "sim" / "algorithms", ROOT / "sim" / "api" / "entry.py", ROOT / "sim" / "api" / "reference.py"]
    reads = allowlist.read_set("kernel", [str(f) for f in forbidden])
    assert not any(Path(p).is_relative_to(f) for p in reads.paths for f in forbidden)
    assert {"sim.machine.occupancy", "sim.machine.mask", "sim.grading.gpu_kernel"} <= set(reads.modules)
    # the submission's own process only hands in its source: a CPU assignment's read set, no gpu package
    submission = allowlist.read_set("gpu", [str(f) for f in forbidden])
    assert (
        submission.modules == allowlist.read_set("chip", []).modules
        and "sim.grading.gpu_kernel" not in submission.modules
    )


@walls_here
def test_a_gpu_assignments_submission_gets_a_cpu_assignments_walls_and_its_kernel_cudas():
    # before: the submission's process ran under CUDA's walls (its threads, Unix sockets, /dev/nvidia*, no
    # address-space cap) though since kernel_run it only hands in a str
    walls = grader.isolate(spec.load(spec.locate("05")), [MASTER])
    assert "seccomp" in walls.layers and seccomp.CUDA not in walls.layers and not walls.settings["cuda"]
    assert not any(p.startswith("/dev/nvidia") for p in walls.settings["write_extra"])
    assert seccomp.CUDA in walls.kernel.layers and walls.kernel.settings["cuda"] and walls.missing == ()
    assert walls.line().endswith(f"; the kernel's process: {seccomp.CUDA}")
    assert grader.isolate(ONE_TEST, [MASTER]).kernel is None


def test_a_master_beside_the_library_is_refused_but_a_students_own_copy_there_is_not():
    beside = replace(ONE_TEST, path=ROOT / "02_flash1_forward.py")  # the repository's root: sim/ is in its folder
    with pytest.raises(InputError, match=r"reaches .*; refusing to grade"):
        grader.isolate(beside, [beside.path])
    assert not grader.isolate(beside, [beside.path], self_check=True).weak


def test_every_driver_an_assignment_may_name_has_a_read_set():
    """The Triton driver once had none: grading assignments 7-8 where Triton is installed raised KeyError 'triton'
    before any child started (CI, without Triton, skips those tests)."""
    from sim.grading import allowlist, spec

    assert set(spec.DRIVERS) <= set(allowlist.ENTRIES)
    assert {spec.load(p).grading["driver"] for p in spec.masters()} <= set(allowlist.ENTRIES)


def test_a_cuda_folder_that_holds_a_forbidden_file_is_split_around_it(tmp_path):
    for name in ("lib/a.so", "lib/python/master.py", "lib/python/ok.py", "lib/python/deep/x.py", "share/y"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    forbidden = [str(tmp_path / "lib" / "python" / "master.py")]
    parts = allowlist.around(str(tmp_path), forbidden)
    assert sorted(parts) == sorted(str(tmp_path / p) for p in ("lib/a.so", "lib/python/deep", "lib/python/ok.py",
                                                               "share"))  # fmt: skip
    assert allowlist.around(str(tmp_path / "share"), forbidden) == [str(tmp_path / "share")]
    assert allowlist.around(forbidden[0], forbidden) == [] == allowlist.around(str(tmp_path), [str(tmp_path)])
    read, write = allowlist.cuda_paths(forbidden)
    assert "/dev/null" in read and not {"/etc", "/dev", "/proc"} & set(read) and write[-1] == "/proc/self"


REFUSES_MOUNT = """
import json, sys
sys.path.insert(0, {root!r})
from dataclasses import replace
from sim.core.errors import InputError
from sim.grading import grader, spec
from sim.grading.confine import seccomp
from sim.grading.confine.syscall import prctl
prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
mount, allow, eperm = seccomp.ARCHES[seccomp.MACHINE][1]["mount"], {allow}, {eperm}
seccomp._install([(0x20, 0, 0, 0), (0x15, 0, 1, mount), (0x06, 0, 0, eperm), (0x06, 0, 0, allow)])
master = spec.locate("02")
one = replace(spec.load(master), tests=spec.load(master).tests[:1])
try:
    walls = grader.isolate(one, [master])
except InputError as e:
    print(json.dumps({{"refused": str(e)}}))
else:
    (report,) = grader.grade(one, [master], seed=1, walls=walls)
    print(json.dumps({{"line": walls.line(), "missing": list(walls.missing), "score": report.score}}))
"""


@walls_here
def test_namespaces_that_unshare_but_fail_after_are_left_out_not_fatal():
    # Ubuntu 24.04's AppArmor lets unshare succeed and refuses the uid map after; here a filter refuses the tmpfs's
    # mount after unshare, the same kind of failure. Before: "a confined process could not start here (…mount…)"
    code = REFUSES_MOUNT.format(root=str(ROOT), allow=ALLOW, eperm=EPERM)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"line": result.get("line"), "missing": [], "score": 10}, result
    assert "namespaces" not in result["line"] and " · seccomp · " in result["line"], result
