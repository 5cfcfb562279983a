"""What a submission's guard reported, made into its report's flags: each one line, the same one once, the first
`MAX_FLAGS` of them then a count; a process that reports more than `MAX_VIOLATIONS` is stopped there.

A child's "violation" frames arrive while the grader waits for a test's end (`sandbox.Child.exchange` appends each
to `child.violations`); `watch` makes that list a `Tally` that keeps the first `MAX_VIOLATIONS` and, at the next,
kills the process and ends the exchange as its death (`STOPPED`). The guard's own frames name one of
`guard.WHAT` and a path or module (`schema` refuses any other), so the flags are short whatever the child sends.
"""

from sim.grading import sandbox
from sim.grading.report import SubmissionReport, one_line

MAX_VIOLATIONS = 20  # frames a process may report (each one a refused read): past it, it is stopped
MAX_FLAGS = 5  # distinct flags a report lists; the rest are counted
MAX_DETAIL = 200  # characters of a flag's detail (the path or module tried)
STOPPED = f"stopped: its process reported more than {MAX_VIOLATIONS} refused reads of the solutions"


class Tally(list):
    """A child's violations: the first MAX_VIOLATIONS kept; one more kills the process (ChildDied, `STOPPED`)."""

    def __init__(self, child: sandbox.Child):
        super().__init__()
        self.child = child

    def append(self, frame: dict) -> None:
        if len(self) >= MAX_VIOLATIONS:
            self.child.kill("violations")
            raise sandbox.ChildDied(STOPPED)
        super().append(frame)


def watch(child: sandbox.Child) -> sandbox.Child:
    """`child`, its violations kept in a `Tally`."""
    child.violations = Tally(child)
    return child


def flag(report: SubmissionReport, child: sandbox.Child) -> bool:
    """Set the report's flags from the child's violations (and those it holds); whether there are any."""
    lines = [f for f in report.flags if not f.startswith("… and ")]
    lines += [f"{v['what']}: {one_line(str(v.get('detail', ''))[:MAX_DETAIL])}" for v in child.violations]
    distinct = list(dict.fromkeys(lines))  # a set that keeps the order they came in
    more = len(distinct) - MAX_FLAGS
    report.flags = distinct[:MAX_FLAGS] + ([f"… and {more} more"] if more > 0 else [])
    return bool(report.flags)
