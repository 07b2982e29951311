"""Sparse wirings of the biophysical LTC, as the original authors' `ncps.wirings`
(Lechner et al. 2020): which neurons synapse onto which, with which polarity."""

from ._wiring import (
    Wiring as Wiring,
    auto_ncp as auto_ncp,
    fully_connected as fully_connected,
    make_wiring as make_wiring,
    ncp as ncp,
    random_wiring as random_wiring,
)


__all__ = [
    "Wiring",
    "make_wiring",
    "fully_connected",
    "random_wiring",
    "ncp",
    "auto_ncp",
]
