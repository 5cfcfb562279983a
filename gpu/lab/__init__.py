"""The tools that measure the kernels: bench, compare, harness, ladder, counters, the training demo, renderers and recorded results."""
