"""ltc_jax: Liquid Time-Constant networks in JAX, with memory-efficient gradients.

The public API is everything in `__all__`, by audience as optax's: the models,
fields, inputs, integrator, training entry points and errors here;
`ltc_jax.training`, the parts training is composed of (objectives, the training
state, failure policies, placements, monitors, checkpoints, optimisers and the
defaults derived from data); `ltc_jax.measure`, measurement; `ltc_jax.wirings`,
the biophysical cell's wirings; `ltc_jax.datasets`, the bundled data and its
readers. The command line and the main job live in `ltc_jax.app`. Other modules
are internal.
"""

import importlib.metadata

from . import (
    datasets as datasets,
    measure as measure,
    training as training,
    wirings as wirings,
)
from ._adjoint import WindowedBacksolveAdjoint as WindowedBacksolveAdjoint
from ._batch import (
    Batch as Batch,
    batches as batches,
    make_batch as make_batch,
    make_input_path as make_input_path,
)
from ._cfc import (
    CfC as CfC,
    CfCCell as CfCCell,
    ltc_closed_form_step as ltc_closed_form_step,
)
from ._errors import (
    CheckpointError as CheckpointError,
    DivergenceError as DivergenceError,
    NonFiniteLossError as NonFiniteLossError,
    SolverFailureError as SolverFailureError,
    SubprocessError as SubprocessError,
    TrainingFailedError as TrainingFailedError,
)
from ._evaluate import evaluate as evaluate
from ._events import Crossing as Crossing
from ._integrator import Integrator as Integrator, make_integrator as make_integrator
from ._jump import JumpLTC as JumpLTC
from ._model import (
    LTC as LTC,
    AbstractSequenceModel as AbstractSequenceModel,
    LinearReadout as LinearReadout,
    MotorReadout as MotorReadout,
)
from ._names import (
    ADJOINT_NAMES as ADJOINT_NAMES,
    SOLVER_NAMES as SOLVER_NAMES,
    make_adjoint as make_adjoint,
    make_solver as make_solver,
)
from ._paths import InputPath as InputPath
from ._results import RESULTS as RESULTS
from ._solve import Trajectory as Trajectory, integrate as integrate
from ._solver import (
    RK4 as RK4,
    AbstractLTCFormTerm as AbstractLTCFormTerm,
    FusedLTC as FusedLTC,
    LTCTerm as LTCTerm,
)
from ._train import fit as fit, train_on as train_on
from ._vector_field import (
    AbstractLTCField as AbstractLTCField,
    BiophysicalLTCVectorField as BiophysicalLTCVectorField,
    LTCVectorField as LTCVectorField,
)


__version__ = importlib.metadata.version("ltc_jax")

__all__ = [
    # Models and vector fields
    "LTC",
    "CfC",
    "CfCCell",
    "JumpLTC",
    "ltc_closed_form_step",
    "AbstractSequenceModel",
    "LinearReadout",
    "MotorReadout",
    "AbstractLTCField",
    "LTCVectorField",
    "BiophysicalLTCVectorField",
    # Inputs
    "InputPath",
    "Batch",
    "make_input_path",
    "make_batch",
    "batches",
    # Solving
    "Integrator",
    "make_integrator",
    "make_solver",
    "make_adjoint",
    "SOLVER_NAMES",
    "ADJOINT_NAMES",
    "WindowedBacksolveAdjoint",
    "RK4",
    "FusedLTC",
    "LTCTerm",
    "AbstractLTCFormTerm",
    "integrate",
    "Crossing",
    "Trajectory",
    "RESULTS",
    # Training
    "fit",
    "train_on",
    "evaluate",
    # Errors
    "SolverFailureError",
    "NonFiniteLossError",
    "DivergenceError",
    "TrainingFailedError",
    "CheckpointError",
    "SubprocessError",
    # Namespaces by audience
    "training",
    "measure",
    "wirings",
    "datasets",
]
