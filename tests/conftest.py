import gc

import jax
import jax.random as jr
import pytest


# As diffrax's own test suite: float64 everywhere (gradients are compared), strict
# dtype promotion (no silent mixing of float32 and float64) and strict rank
# promotion (no silent broadcasting of a vector against a batch).
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def getkey():
    """Fresh PRNG keys, deterministic per test."""
    key = jr.PRNGKey(5678)

    def _getkey():
        nonlocal key
        key, subkey = jr.split(key)
        return subkey

    return _getkey


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_code():
    """Free each module's compiled executables when it ends.

    XLA on CPU maps every executable's code into the process (several memory
    mappings each) and JAX's caches keep them alive, so one process that
    compiles the whole suite passes Linux's default limit of 65,530 mappings
    (`vm.max_map_count`) and crashes inside the compiler without a message.
    """
    yield
    jax.clear_caches()
    gc.collect()
