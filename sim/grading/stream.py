"""The online softmax's input served one column at a time: the grader keeps X, the submission's `update` sees x_t.

The update driver (`sim.grading.harness`) loads column t of X as it would a tile, calls update(m, ℓ, x_t) and stores
the state it returned. Column t + 1 is served only once that state is in and matches the float64 state of columns
0 … t within the test's bounds, so the submission's process never holds X whole (before, `update` could read all of
X from its caller's frame and compute m and ℓ in one pass: review of 2026-11-28) and no state can use a column it was
not yet given.
"""

from dataclasses import replace

import numpy as np

from sim.grading.checks import compare
from sim.grading.problem import Problem, softmax_state


class ColumnServer:
    """Answers the update driver's loads of X's columns and checks each state it stores; `error` is the first fault."""

    def __init__(self, problem: Problem):
        self.problem, self.X = problem, problem.inputs["X"]
        self.served = 0  # columns given so far
        self.stored = 0  # states received so far (each after the column of the same index)
        self.error: str | None = None

    def handle(self, header: dict, arrays: list[np.ndarray]):
        """A column for a load (or a refusal), None for a stored state; anything else ends the test."""
        op, t = header["op"], self.served
        if self.error is None and op == "load":
            if header.get("tensor") != "X" or header.get("cols") != [t, t + 1] or header.get("rows") is not None:
                self.error = f"asked for {_what(header)} where the next input is column {t} of X"
            elif self.stored < t:
                self.error = f"asked for column {t} of X before handing back the state after column {t - 1}"
            elif t >= self.X.shape[1]:
                self.error = f"asked for column {t} of X, which has {self.X.shape[1]} columns"
            else:
                self.served += 1
                return {"op": "tile", "nbytes": self.X.shape[0] * 8}, [self.X[:, t].copy()]
        elif self.error is None and op == "store":
            self._state(header, arrays)
        elif self.error is None:
            self.error = f"sent {op!r}, which the online softmax's driver never sends"
        return ({"op": "refused", "type": "InputError", "message": self.error}, []) if op == "load" else None

    def _state(self, header: dict, arrays: list[np.ndarray]) -> None:
        t = self.stored
        if header.get("tensor") != "state" or t >= self.served:
            self.error = f"stored {_what(header)} where the state after column {t} was expected"
            return
        (state,) = arrays
        rows = self.X.shape[0]
        if state.shape != (2, rows):
            self.error = f"update returned a state of shape {state.shape[1:]} after column {t}; expected ({rows},)"
            return
        m, ℓ = softmax_state(self.X[:, : t + 1])
        wrong = compare(replace(self.problem, reference={"m": m, "ℓ": ℓ}), {"m": state[0], "ℓ": state[1]})
        if wrong:
            self.error = f"after column {t}: {wrong}"
        self.stored += 1


def _what(header: dict) -> str:
    """A request's tensor and tile in a few words."""
    return f"{str(header.get('tensor'))[:20]!r} rows {header.get('rows')} cols {header.get('cols')}"
