"""The IO-aware autograder: grades how a FlashAttention answer moved its data, not only its output.

A submission runs in a child process (`sandbox`, `harness`, `guard`) that confines itself with the
kernel's help before it imports anything (`confine`: rlimits, uid, namespaces, Landlock, seccomp;
`isolation` probes them once a run, `allowlist` computes what the child may read). It computes on a
proxy chip (`proxy`); the grader's own `sim.machine.memory.Chip` answers it (`server`) after every message
passes the `schema`, so the output and the bytes scored (`checks`, `traffic`, `bound`) are the
grader's. `grader.grade` runs an assignment (`spec`) on submissions, keeping a `journal` to resume;
`flashsim grade`, `flashsim assignments` and `flashsim bench grade` live in `sim.cli.grading`.
"""
