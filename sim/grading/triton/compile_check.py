"""The second wall: every kernel of the file compiled for a real GPU (sm_90, to cubin) on the CPU, in a fresh process.

Triton's compiler needs no GPU to reach cubin; it refuses what the interpreter lets through
(Python on the host, calls to anything but Triton's language). Each check runs in a new process
with an empty cache, because a second compile in the same process can pass silently.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sim.grading.triton import launch

TIMEOUT_S = 120
BOOTSTRAP = """
import resource, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_CPU, (60, 61))
sys.path.insert(0, sys.argv[1])
from sim.grading.triton.compile_check import main
main(sys.argv[2], sys.argv[3])
"""


def error(path: Path, grading: dict) -> str:
    """ "" if every kernel of `path` compiles for sm_90, else the first compiler error in one line."""
    root = str(Path(__file__).resolve().parents[3])
    for spec in launch.signatures(grading):
        with tempfile.TemporaryDirectory(prefix="flashsim-triton-") as home:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
                   "TRITON_CACHE_DIR": os.path.join(home, "cache"), "TRITON_DEFAULT_FP_FUSION": "1"}  # fmt: skip
            try:
                done = subprocess.run([sys.executable, "-I", "-B", "-c", BOOTSTRAP, root, str(path.resolve()), json.dumps(spec)],
                                      cwd=home, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                                      start_new_session=True)  # fmt: skip
            except subprocess.TimeoutExpired:
                return f"compiling {spec[0]} for sm_90 took more than {TIMEOUT_S} s"
        lines = done.stdout.strip().splitlines()
        try:
            verdict = json.loads(lines[-1])
        except (IndexError, ValueError):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return f"compiling {spec[0]} for sm_90 failed: {last}"
        if verdict.get("error"):
            return str(verdict["error"])[:400]
    return ""


def main(file: str, spec: str) -> None:
    """In the fresh process: compile one kernel; print {"error": ""} or the compiler's message in one line."""
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget

    name, signature, constexprs = json.loads(spec)
    try:
        module_spec = importlib.util.spec_from_file_location("submission", file)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        kernel = getattr(module, name, None)
        if not isinstance(kernel, triton.runtime.JITFunction):
            raise NameError(f"the kernel file defines no @triton.jit function {name}")
        source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
        triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        print(json.dumps({"error": ""}))
    except Exception as e:  # the compiler's own errors carry the kernel's line in their text
        print(json.dumps({"error": f"does not compile for a GPU (sm_90): {_one_line(e)}"}))


def _one_line(e: Exception) -> str:
    """The compiler's message without the source excerpt it quotes: its last non-empty line, and the kernel line."""
    text = [t for t in str(e).splitlines() if t.strip()]
    where = next((t.split(":")[0] for t in text if t[:1].isdigit() and ":" in t), "")
    message = text[-1].strip() if text else type(e).__name__
    return f"{message} (at {where} of the kernel)" if where else message
