"""Warnings attributed to the line of the caller's own code."""

import sys
import warnings


_THROUGH = ("ltc_jax", "equinox", "jax", "jaxtyping", "beartype", "typeguard")
"""The packages a warning passes through on its way out: ltc_jax itself, and
those that wrap its functions and methods (Equinox's bound methods, the runtime
type checkers). The application `ltc_jax.app` is the caller's code."""


def _passes_through(module: str) -> bool:
    if module == "ltc_jax.app" or module.startswith("ltc_jax.app."):
        return False
    return any(module == name or module.startswith(name + ".") for name in _THROUGH)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """`warnings.warn(message, category)`, attributed to the first frame
    outside ltc_jax and the packages that wrap it (`_THROUGH`): the line of
    the user's code that called into the library, however deep the warning
    was raised, so that a filter on that module, and the line printed, are the
    user's."""
    frame, level = sys._getframe(1), 2  # level 2: warn's caller
    while frame is not None and _passes_through(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
