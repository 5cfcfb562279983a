"""GPU results recorded on a real GPU and shipped in gpu/results/, for machines without one (lesson 8 reads them).

A recording is the JSON a GPU command wrote (`flashsim bench gpu --json FILE`: see gpu/bench.py for its
rows); `load(name)` reads gpu/results/NAME.json and says where it came from — the GPU (its "device"
entry), the date and the command. A recording carries "date" and "command" at its top level; the ones
made before recordings did are dated from PROVENANCE (the run log in gpu/NOTES.md and the commit that
added the file). Pure Python: no CuPy, no GPU.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from sim.errors import InputError

RESULTS_DIR = Path(__file__).parent / "results"
PROVENANCE = {  # recordings made before they carried their date and command: gpu/NOTES.md, "Final verification"
    "bench-h100": {
        "date": "2026-11-20",
        "command": "flashsim bench gpu --json gpu/results/bench-h100.json --markdown gpu/results/bench-h100.md",
    },
}


@dataclass(frozen=True)
class Recording:
    """One recorded result: the report as the command wrote it, and where it came from."""

    name: str
    report: dict
    gpu: str
    date: str
    command: str

    def label(self) -> str:
        """One line for the reader: recorded, on which GPU, when, with which command."""
        return f"recorded on {self.gpu}, {self.date}, with `{self.command}` (gpu/results/{self.name}.json)"


def names(prefix: str = "", results_dir: Path = RESULTS_DIR) -> list[str]:
    """The recordings shipped in `results_dir` whose name starts with `prefix`, sorted."""
    return sorted(p.stem for p in results_dir.glob(f"{prefix}*.json"))


def load(name: str, results_dir: Path = RESULTS_DIR) -> Recording:
    """The recording gpu/results/NAME.json, with its GPU, date and command."""
    path = results_dir / f"{name}.json"
    if not path.is_file():
        raise InputError(
            f"name: no recording {name!r} in {results_dir}; choose one of {', '.join(names('', results_dir))}"
        )
    report = json.loads(path.read_text())
    where = {**PROVENANCE.get(name, {}), **{k: report[k] for k in ("date", "command") if k in report}}
    missing = [k for k in ("date", "command") if k not in where] + ([] if "device" in report else ["device"])
    if missing:
        raise InputError(f"name: recording {path.name} does not say its {', '.join(missing)}; a recording must")
    return Recording(name, report, report["device"]["name"], where["date"], where["command"])
