"""The first two walls, in a fresh process: the allow-list, then every kernel of the file compiled for a real GPU
(sm_90, to cubin) on the CPU.

Triton's compiler needs no GPU to reach cubin; it refuses what the interpreter lets through
(Python on the host, calls to anything but Triton's language). It compiles only the branches a
kernel's constexprs take, so each kernel is compiled at every test's (BLOCK_M, BLOCK_N, BLOCK_D,
CAUSAL, dtype), each distinct one once, in one new process with an empty cache.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from sim.grading.triton import launch

TIMEOUT_S = 120
CPU_S = 60  # a compile past it is killed (SIGXCPU), and refused: an unrolled loop of 10⁹ once outran it unseen
AS_BYTES = 2 << 30  # the process's address space: 0.33 GiB at its peak for the masters 07 and 08 (ptxas its own)
SAID_BYTES = 4096  # what is read back of the verdict, and of stderr's end
BOOTSTRAP = """
import resource, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_CPU, (int(sys.argv[6]), int(sys.argv[6]) + 1))
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[5]), int(sys.argv[5])))
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))
sys.path.insert(0, sys.argv[1])
from sim.grading.triton.compile_check import main
main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
"""


def error(path: Path, grading: dict, cases: list[dict] = ()) -> str:
    """ "" if `path` passes the allow-list and every kernel of it but the handout's stubs compiles for sm_90 at each
    of `cases`' constexprs (`launch.signatures`), else the allow-list's refusal or the first compiler error in one
    line; one fresh process for all of it (it parses the student's file: not in the grader's)."""
    root = str(Path(__file__).resolve().parents[3])
    specs = launch.signatures(grading, cases)
    names = ", ".join(dict.fromkeys(s[0] for s in specs))
    with tempfile.TemporaryDirectory(prefix="flashsim-triton-") as home, open(Path(home) / "stderr", "w+b") as err:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
               "TRITON_CACHE_DIR": os.path.join(home, "cache"), "TRITON_DEFAULT_FP_FUSION": "1"}  # fmt: skip
        argv = [sys.executable, "-I", "-B", "-c", BOOTSTRAP, root, str(path.resolve()), json.dumps(specs)]
        verdict, said = os.pipe()
        with os.fdopen(verdict, "rb") as reading:  # both ends closed however Popen ends (it can raise: EAGAIN)
            try:
                child = subprocess.Popen([*argv, str(said), str(AS_BYTES), str(CPU_S)], cwd=home, env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         pass_fds=(said,), start_new_session=True)  # fmt: skip
            finally:
                os.close(said)  # (the child's copy is its own: the read below ends when the child does)
            try:
                child.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return f"compiling {names} for sm_90 took more than {TIMEOUT_S} s"
            finally:
                _end(child)
                text = reading.read(SAID_BYTES)
        err.seek(max(0, err.seek(0, os.SEEK_END) - SAID_BYTES))
        last = (err.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1][:300]
    try:
        if child.returncode == 0:
            return str(json.loads(text)["error"])[:400]
    except (ValueError, KeyError, TypeError):
        pass
    ended = f"it ended with signal {-child.returncode}" if child.returncode < 0 else last
    return f"compiling {names} for sm_90 failed: {ended}"


def _end(child: subprocess.Popen) -> None:
    """The compile's process and whatever it started (ptxas) killed, if any is left."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def main(file: str, specs: str, said: int) -> None:
    """In the fresh process: the allow-list, then each kernel but a stub compiled at each of its distinct
    constexprs (never one twice: a second compile of the same could come from Triton's cache); write {"error": ""},
    the allow-list's refusal or the first compiler message to `said`, the verdict's own pipe (what the file prints
    at its load reaches only stdout, which nobody reads)."""
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget

    from sim.core.errors import InputError
    from sim.grading.triton import allowlist

    try:
        with open(file, encoding="utf-8") as f:
            stubs = allowlist.check(f.read(), os.path.basename(file))
    except InputError as e:
        _say(said, str(e))
        return
    kernel = None
    try:
        module_spec = importlib.util.spec_from_file_location("submission", file)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        for name, signature, constexprs in (s for s in json.loads(specs) if s[0] not in stubs):
            kernel = getattr(module, name, None)
            if not isinstance(kernel, triton.runtime.JITFunction):
                _say(said, f"{os.path.basename(file)} defines no @triton.jit function {name}")
                return
            if list(kernel.arg_names) != list(signature):
                wanted = ", ".join(signature)
                _say(said, f"{name} must take ({wanted}), as the grader launches it")
                return
            source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
            triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        _say(said, "")
    except Exception as e:  # the compiler's errors: any exception, with the node it stopped at
        where = _line(e, kernel if isinstance(kernel, triton.runtime.JITFunction) else None)
        message = f"{os.path.basename(file)} line {where}: does not compile for a GPU (sm_90): {_message(e)}"
        _say(said, message)


def _say(said: int, error: str) -> None:
    """The verdict, written once to its pipe."""
    os.write(said, json.dumps({"error": error}).encode()[:SAID_BYTES])
    os.close(said)


def _line(e: Exception, kernel) -> str:
    """The file's line the compiler stopped at (its node's line counts from the kernel's `def`), or "?"."""
    node = getattr(e, "node", None)
    if kernel is None or getattr(node, "lineno", None) is None:
        return "?"
    first = getattr(kernel, "def_file_line_number", None)  # Triton ≤ 3.5; 3.6 names it starting_line_number
    return str((first if first is not None else kernel.starting_line_number) + node.lineno - 1)


def _message(e: Exception) -> str:
    """The compiler's message without the source excerpt it quotes: the last non-empty line of the innermost error
    (a call's error quotes the call with a caret and keeps the callee's own as its cause)."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = [t.strip() for t in str(e).splitlines() if t.strip()]
    return text[-1][:300] if text else type(e).__name__
