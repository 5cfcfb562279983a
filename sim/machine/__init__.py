"""The machine below the listings: memory levels, the L2 cache, the SMs and the time they take."""
