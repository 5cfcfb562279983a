"""Rich (and Markdown) renderers for `flashsim bench gpu [--backward]`: pure functions from reports to renderables."""

from rich.console import Group
from rich.table import Table
from rich.text import Text

from sim.core.format import fixed, human_bytes, ratio, tflops

DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def _tflops(entry: dict | None) -> str:
    if entry is None:
        return "—"
    if "status" in entry:
        return entry["status"]
    return tflops(entry["tflops"])


def _versus(a: dict | None, b: dict | None, show) -> str:
    """a's TFLOP/s over b's, shown by `show`, or — where either has none."""
    if not a or not b or "tflops" not in a or "tflops" not in b:
        return "—"
    return show(a["tflops"] / b["tflops"])


def _mem(entry: dict | None) -> str:
    if not entry or "peak_extra_bytes" not in entry:
        return entry.get("status", "—") if entry else "—"
    return human_bytes(entry["peak_extra_bytes"])


def _backward(entry: dict | None) -> str:
    """The backward-alone rate of an entry (TFLOP/s at 2.5 × forward FLOPs), or —."""
    return tflops(entry["backward_tflops"]) if entry and "backward_tflops" in entry else "—"


def _tax(r: dict) -> str:
    """How much longer forward + backward takes through autograd than through the direct calls: +3%."""
    a, f = r.get("autograd"), r.get("flash")
    if not a or not f or "ms" not in a or "ms" not in f:
        return "—"
    return f"{100 * (a['ms'] / f['ms'] - 1):+.0f}%"


def _ratio(key: str, base: str):
    return lambda r: _versus(r.get(key), r.get(base), lambda x: fixed(x, 2))


KEYS = [
    ("dtype", lambda r: DTYPE_SHORT[r["dtype"]]),
    ("d", lambda r: str(r["d"])),
    ("causal", lambda r: "yes" if r["causal"] else "no"),
    ("N", lambda r: str(r["n"])),
]
BASELINES = [
    ("SDPA flash", lambda r: _tflops(r.get("sdpa"))),
    ("SDPA cuDNN", lambda r: _tflops(r.get("cudnn"))),
    ("SDPA default", lambda r: _tflops(r.get("default"))),
]
# (header, cell) per column; ratios are flashsim's public call (with --backward: through autograd) over each SDPA
COLUMNS = [
    *KEYS,
    ("flashsim", lambda r: _tflops(r["flash"])),
    *BASELINES,
    ("/flash", _ratio("flash", "sdpa")),
    ("/cuDNN", _ratio("flash", "cudnn")),
    ("/default", _ratio("flash", "default")),
    ("standard", lambda r: _tflops(r["standard"])),
    ("flashsim/standard", lambda r: _versus(r["flash"], r["standard"], ratio)),
    ("rung 1", lambda r: _tflops(rung1(r))),
    ("mem flashsim", lambda r: _mem(r["flash"])),
    ("mem SDPA", lambda r: _mem(r.get("sdpa"))),
    ("mem standard", lambda r: _mem(r["standard"])),
]
BACKWARD_COLUMNS = [
    *KEYS,
    ("flashsim", lambda r: _tflops(r["flash"])),
    ("autograd", lambda r: _tflops(r.get("autograd"))),
    ("tax", _tax),
    *BASELINES,
    ("/flash", _ratio("autograd", "sdpa")),
    ("/cuDNN", _ratio("autograd", "cudnn")),
    ("/default", _ratio("autograd", "default")),
    ("bwd flashsim", lambda r: _backward(r["flash"])),
    ("bwd flash", lambda r: _backward(r.get("sdpa"))),
    ("bwd cuDNN", lambda r: _backward(r.get("cudnn"))),
    ("standard", lambda r: _tflops(r["standard"])),
    ("mem flashsim", lambda r: _mem(r["flash"])),
    ("mem SDPA", lambda r: _mem(r.get("sdpa"))),
    ("mem standard", lambda r: _mem(r["standard"])),
]
MEMORY_COLUMNS = [
    ("N", lambda r: str(r["n"])),
    ("flashsim", lambda r: _mem(r["flash"])),
    ("SDPA flash", lambda r: _mem(r.get("sdpa"))),
    ("standard", lambda r: _mem(r["standard"])),
]


def bench_columns(report: dict) -> list[tuple]:
    """The columns of the report's table: the forward's (with the readable rung 1) or the backward's (flashsim
    direct and through autograd, the autograd tax, the backward alone)."""
    return BACKWARD_COLUMNS if report["kind"] == "bench-backward" else COLUMNS


def rung1(row: dict) -> dict | None:
    """Rung 1's timing in a row (recordings before issue 19 name it "v1")."""
    return row.get("rung1", row.get("v1"))


def _title(report: dict) -> str:
    what = "forward + backward" if report["kind"] == "bench-backward" else "forward"
    return f"FlashAttention-2 {what} on {report['device']['name']} (TFLOP/s)"


def _notes(report: dict) -> list[str]:
    notes = list(report["notes"])
    if report.get("torch"):
        notes.append(
            f"SDPA: torch {report['torch']}; flash and cuDNN forced with torch.nn.attention.sdpa_kernel(SDPBackend."
            "FLASH_ATTENTION / CUDNN_ATTENTION), default: no backend named; ratios: flashsim"
            + (" through autograd" if report["kind"] == "bench-backward" else "")
            + " over each, timed side by side in interleaved rounds"
        )
    return notes


def _table(title: str, columns: list[tuple], rows: list[dict]) -> Table:
    table = Table(title=title, title_justify="left")
    for header, _ in columns:
        table.add_column(header, justify="right")
    for r in rows:
        table.add_row(*(cell(r) for _, cell in columns))
    return table


def _memory_title(report: dict) -> str:
    m = report.get("memory_config")
    return "peak extra device memory, causal forward + backward, against N" + (f" ({m})" if m else "")


def bench_table(report: dict) -> Group:
    """The `flashsim bench gpu` table: TFLOP/s per implementation, ratios, memory; with --backward, memory vs N."""
    parts = [_table(_title(report), bench_columns(report), report["rows"])]
    if "memory" in report:
        parts.append(_table(_memory_title(report), MEMORY_COLUMNS, report["memory"]))
    return Group(*parts, *(Text(f"· {note}", style="dim") for note in _notes(report)))


def _markdown(columns: list[tuple], rows: list[dict]) -> list[str]:
    return [
        "| " + " | ".join(h for h, _ in columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(cell(r) for _, cell in columns) + " |" for r in rows),
    ]


def bench_markdown(report: dict) -> str:
    """The same tables as Markdown, for results files and the README, with the command and the environment."""
    env = report["env"]
    lines = [
        f"# `flashsim bench gpu{' --backward' if report['kind'] == 'bench-backward' else ''}` on {report['device']['name']}",
        "",
        f"- {env['date']}: `{env['command']}`; driver {env['driver']}, CuPy {env['cupy']}, PyTorch {env['torch']}",
        *(f"- {note}" for note in _notes(report)),
        "- TFLOP/s from the median of CUDA-event timings after warm-up, on random inputs; memory: the most device "
        "memory a call held beyond its inputs.",
        "",
        *_markdown(bench_columns(report), report["rows"]),
    ]
    if "memory" in report:
        lines += ["", f"{_memory_title(report)}:", "", *_markdown(MEMORY_COLUMNS, report["memory"])]
    return "\n".join(lines) + "\n"


def bench_progress(row: dict) -> str:
    """One finished benchmark configuration on one line (printed to stderr while the run goes on)."""
    keys = ("flash", "autograd", "sdpa", "cudnn", "default", "standard", "rung1")
    parts = [f"{k} {_tflops(row.get(k))}" for k in keys if k in row]
    return f"{row['dtype']} d={row['d']} causal={row['causal']} N={row['n']}: " + ", ".join(parts) + " TFLOP/s"
