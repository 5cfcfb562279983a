"""What measures the GPU library: benchmarks, comparisons with the simulator, counters, recordings."""
