"""Solvers that diffrax lacks, one per module, as diffrax does in `diffrax/_solver/`."""

from .fused import (
    AbstractLTCFormTerm as AbstractLTCFormTerm,
    FusedLTC as FusedLTC,
    LTCTerm as LTCTerm,
)
from .rk4 import RK4 as RK4
