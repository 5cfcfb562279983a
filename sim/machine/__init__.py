"""The machine: memory (Chip, HBM, SRAM), ledger, trace, hardware, blocks and the closed forms' counting."""
