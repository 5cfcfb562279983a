"""Helpers behind the commands and lessons: reports, training summaries, the paper's figures, sweeps, benches, the walkthrough, lesson checks."""
