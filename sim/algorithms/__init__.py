"""The paper's listings, forward and backward, the online softmax and dropout they use, and the registry of them by name."""
