"""The Triton assignment's grader: a `@triton.jit` kernel run by Triton's interpreter on a CPU, its bytes counted."""
