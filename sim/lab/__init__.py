"""Helpers behind commands and lessons: reports, training, the paper's figures, sweeps, benches, real runs."""
