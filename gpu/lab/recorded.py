"""GPU results recorded on a real GPU and shipped in gpu/lab/results/, for machines without one (lesson 8 reads them).

A recording is the JSON a GPU command wrote (gpu/lab/results.py describes them); `load(name)` reads
gpu/lab/results/NAME.json and says where it came from — the GPU (its "device" entry, or "env"'s "gpu"), the date
and the command (in "env", or at the top level in older recordings). `measured(report, name)` wraps a report
just measured on this machine the same way, labelled as live. Pure Python: no CuPy, no GPU.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from sim.core.errors import InputError

RESULTS_DIR = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Recording:
    """One recorded result: the report as the command wrote it, and where it came from."""

    name: str
    report: dict
    gpu: str
    date: str
    command: str
    live: bool = False  # measured just now on this machine, not read from gpu/lab/results/

    def label(self) -> str:
        """One line for the reader: recorded or measured just now, on which GPU, when, with which command."""
        if self.live:
            return f"measured just now on {self.gpu}, {self.date}, with `{self.command}`"
        return f"recorded on {self.gpu}, {self.date}, with `{self.command}` (gpu/lab/results/{self.name}.json)"


def names(prefix: str = "", results_dir: Path = RESULTS_DIR) -> list[str]:
    """The recordings shipped in `results_dir` whose name starts with `prefix`, sorted."""
    return sorted(p.stem for p in results_dir.glob(f"{prefix}*.json"))


def load(name: str, results_dir: Path = RESULTS_DIR) -> Recording:
    """The recording gpu/lab/results/NAME.json, with its GPU, date and command."""
    path = results_dir / f"{name}.json"
    if not path.is_file():
        raise InputError(
            f"name: no recording {name!r} in {results_dir}; choose one of {', '.join(names('', results_dir))}"
        )
    return _where(json.loads(path.read_text()), name, live=False)


def measured(report: dict, name: str) -> Recording:
    """A report just measured on this machine (what gpu/lab/results/NAME.json would hold), labelled as live."""
    return _where(report, name, live=True)


def _where(report: dict, name: str, live: bool) -> Recording:
    """The report with its GPU, date and command, or InputError naming what it does not say."""
    env = report.get("env", {})
    where = {k: env.get(k, report.get(k)) for k in ("date", "command")}
    where["device"] = report["device"]["name"] if "device" in report else env.get("gpu")
    missing = [k for k in ("date", "command", "device") if where[k] is None]
    if missing:
        what = f"the report {name!r}" if live else f"recording {name}.json"
        raise InputError(f"name: {what} does not say its {', '.join(missing)}; a recording must")
    return Recording(name, report, where["device"], where["date"], where["command"], live)
