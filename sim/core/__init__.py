"""What every layer may import: the errors, the storage dtypes, and how numbers are printed."""
