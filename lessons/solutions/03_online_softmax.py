"""Reference solutions of lesson 3, Online softmax: each block replaces the exercise cell of its name."""


# %% exercise:online_update
def online_update(m, ℓ, x):
    m_new = np.maximum(m, x)
    return m_new, ℓ * np.exp(m - m_new) + np.exp(x - m_new)


# %% exercise:merge
def merge(m1, ℓ1, m2, ℓ2):
    m = np.maximum(m1, m2)
    return m, ℓ1 * np.exp(m1 - m) + ℓ2 * np.exp(m2 - m)
