"""ltc_jax: Liquid Time-Constant networks in JAX, with memory-efficient gradients.

The public API is everything imported here; other modules are internal.
"""

import importlib.metadata

from . import datasets as datasets
from ._integrate import Trajectory as Trajectory, integrate as integrate
from ._model import LTC as LTC
from ._paths import InputPath as InputPath
from ._solve import (
    ADJOINT_NAMES as ADJOINT_NAMES,
    RK4 as RK4,
    SOLVER_NAMES as SOLVER_NAMES,
    Integrator as Integrator,
    make_adjoint as make_adjoint,
    make_integrator as make_integrator,
    make_solver as make_solver,
)
from ._vector_field import LTCVectorField as LTCVectorField


__version__ = importlib.metadata.version("ltc_jax")
