"""The time a test charges a submission's process: its CPU time, the grader's answering it and its sleeps, not wall
clock."""

import time

from sim.grading import resident

WALL_FACTOR = 5  # a test's wall clock may run to 5× its time: a child waits while a busy grader serves others


class Charge:
    """The time a test charges its child, from now: the child's CPU time, the CPU time of the grader's thread
    answering it (`time.thread_time`), and the time it sleeps or is stopped while it owes the grader nothing
    (`waited`). Not wall clock: while other submissions' requests keep the grader busy (its threads share one
    interpreter lock: red team 104's floods of requests timed out honest classmates), or more children run than the
    machine has cores, a child waits without being charged; a child that sleeps is (red team 109: sleeping 49 s a test
    under the 5× wall clock held a grading slot 8 minutes and scored 100). Where /proc cannot be read, the child's
    share is the wall clock."""

    def __init__(self, pid: int):
        self.pid, self.wall, self.own, self.slept = pid, time.monotonic(), time.thread_time(), 0.0
        read = resident.stat(pid)
        self.cpu = None if read is None else read[1]

    def spent(self) -> float:
        """Seconds charged since this began."""
        read = resident.stat(self.pid) if self.cpu is not None else None
        child = time.monotonic() - self.wall if read is None else read[1] - self.cpu + self.slept
        return child + time.thread_time() - self.own

    def waited(self, seconds: float) -> None:
        """The grader waited `seconds` for a child that sent it nothing: charged where the child sleeps or is
        stopped now (not running, nor waiting for a CPU)."""
        read = resident.stat(self.pid)
        if read is not None and read[0] in ("S", "T", "t"):
            self.slept += seconds
