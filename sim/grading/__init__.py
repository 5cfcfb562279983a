"""The IO-aware autograder: grades how a FlashAttention answer moved its data, not only its output.

A submission runs in a guarded child process (`sandbox`, `harness`, `guard`) on a proxy chip
(`proxy`); the grader's own `sim.machine.memory.Chip` answers it (`server`), so the output and the bytes
scored (`checks`, `traffic`) are the grader's. `grader.grade` runs an assignment (`spec`) on
submissions; `commands` holds `flashsim grade`, `flashsim assignments` and `flashsim bench grade`.
"""
