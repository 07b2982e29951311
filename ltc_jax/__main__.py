"""`python -m ltc_jax`: the `ltc-jax` command line."""

from ltc_jax.app.cli import run


run()
