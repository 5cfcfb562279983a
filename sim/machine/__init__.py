"""The machine the listings run on: memory, ledger, trace, hardware, and the devices and links beyond one chip."""
