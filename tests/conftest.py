import jax
import jax.random as jr
import pytest


# As diffrax's own test suite: float64 everywhere (gradients are compared), and
# strict dtype promotion, so no silent mixing of float32 and float64 creeps in.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")


@pytest.fixture
def getkey():
    """Fresh PRNG keys, deterministic per test."""
    key = jr.PRNGKey(5678)

    def _getkey():
        nonlocal key
        key, subkey = jr.split(key)
        return subkey

    return _getkey
