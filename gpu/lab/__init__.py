"""What measures the GPU library: benchmarks, comparisons, probes (tools; the library never imports this)."""
