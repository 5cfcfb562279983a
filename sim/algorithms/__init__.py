"""The algorithms, each in the notation of the paper it comes from."""
