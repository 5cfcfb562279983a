"""The model of the machine: HBM and SRAM (the Chip), the ledger and trace, hardware presets, occupancy, block sizes and the closed-form IO model."""
