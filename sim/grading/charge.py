"""The time a test charges a submission's process: its CPU time and the grader's answering it, not wall clock."""

import time

from sim.grading import resident

WALL_FACTOR = 5  # a test's wall clock may run to 5× its time: a child waits while a busy grader serves others


class Charge:
    """The time a test charges its child: the child's CPU time and the CPU time of the grader's thread answering it
    (`time.thread_time`), from now. Not wall clock: while other submissions' requests keep the grader busy (its
    threads share one interpreter lock: red team 104's floods of requests timed out honest classmates), or more
    children run than the machine has cores, a child waits without being charged. Where /proc cannot be read, the
    child's share is the wall clock."""

    def __init__(self, pid: int):
        self.pid, self.wall, self.own = pid, time.monotonic(), time.thread_time()
        self.cpu = resident.cpu_seconds(pid)

    def spent(self) -> float:
        """Seconds charged since this began."""
        cpu = resident.cpu_seconds(self.pid) if self.cpu is not None else None
        child = time.monotonic() - self.wall if cpu is None else cpu - self.cpu
        return child + time.thread_time() - self.own
