"""The simulated machine: memory levels, the ledger, the trace, hardware presets, sectors and banks."""
