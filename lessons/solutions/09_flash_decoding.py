"""Reference solutions of lesson 9's exercises (the test suite runs the lesson with these in place)."""


# %% exercise:combine
def combine(O_parts, lse_parts):
    """(O, LSE) of the whole row from each chunk's normalised O_p and its lse_p."""
    lse_max = lse_parts.max(axis=0)  # (Nq,)
    LSE = lse_max + np.log(np.exp(lse_parts - lse_max).sum(axis=0))
    O = (np.exp(lse_parts - LSE)[..., None] * O_parts).sum(axis=0)  # (Nq, d)
    return O, LSE


# %% exercise:split_bytes
def split_extra_bytes(Nq, d, s, P):
    """HBM bytes Flash-Decoding with P splits moves beyond one split, one head."""
    F = 4  # float32 partials
    q_rereads = (P - 1) * s * Nq * d
    partials = F * P * Nq * (d + 1)  # O_p and lse_p of every chunk
    return q_rereads + 2 * partials  # written by the split kernel, read by the combine
