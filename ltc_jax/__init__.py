"""ltc_jax: Liquid Time-Constant networks in JAX, with memory-efficient gradients.

The public API is everything in `__all__`; other modules are internal. The
command line and the main job live in `ltc_jax.app`, the bundled data and its
readers in `ltc_jax.datasets`.
"""

import importlib.metadata

from . import datasets as datasets
from ._adjoint import (
    WindowedBacksolveAdjoint as WindowedBacksolveAdjoint,
    default_windows as default_windows,
)
from ._batch import (
    Batch as Batch,
    abstract_batch as abstract_batch,
    batches as batches,
    make_batch as make_batch,
    make_input_path as make_input_path,
)
from ._cfc import (
    CfC as CfC,
    CfCCell as CfCCell,
    ltc_closed_form_step as ltc_closed_form_step,
)
from ._checkpoint import (
    list_checkpoints as list_checkpoints,
    load_checkpoint as load_checkpoint,
    load_latest_checkpoint as load_latest_checkpoint,
    parameter_digest as parameter_digest,
    save_checkpoint as save_checkpoint,
)
from ._defaults import (
    DataDefaults as DataDefaults,
    batch_stop_ratio as batch_stop_ratio,
    derive_defaults as derive_defaults,
    fixed_max_steps as fixed_max_steps,
    observation_spacing as observation_spacing,
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
from ._failures import failure_reason as failure_reason
from ._integrate import Trajectory as Trajectory, integrate as integrate
from ._integrator import (
    Integrator as Integrator,
    StabilityWarning as StabilityWarning,
    ToleranceSchedule as ToleranceSchedule,
    check_stability as check_stability,
    make_integrator as make_integrator,
    resolve_windows as resolve_windows,
    with_tolerances as with_tolerances,
)
from ._loss import (
    loss_and_metrics as loss_and_metrics,
    make_train_step as make_train_step,
)
from ._measure import (
    CompiledMemory as CompiledMemory,
    Measurement as Measurement,
    call_in_subprocess as call_in_subprocess,
    compiled_memory as compiled_memory,
    count_evaluations as count_evaluations,
    counted_solve as counted_solve,
    device_memory_stats as device_memory_stats,
    environment as environment,
    flatten_gradient as flatten_gradient,
    gradient_relative_error as gradient_relative_error,
    loss_gradient as loss_gradient,
    measure as measure,
    process_peak_bytes as process_peak_bytes,
    process_resident_bytes as process_resident_bytes,
    release_free_memory as release_free_memory,
    reset_process_peak as reset_process_peak,
    runtime_peak_bytes as runtime_peak_bytes,
    time_calls as time_calls,
)
from ._model import (
    LTC as LTC,
    LinearReadout as LinearReadout,
    MotorReadout as MotorReadout,
)
from ._names import (
    ADJOINT_NAMES as ADJOINT_NAMES,
    SOLVER_NAMES as SOLVER_NAMES,
    make_adjoint as make_adjoint,
    make_solver as make_solver,
)
from ._optimizer import make_optimizer as make_optimizer
from ._parallel import (
    data_mesh as data_mesh,
    replicate as replicate,
    shard_batch as shard_batch,
)
from ._paths import InputPath as InputPath
from ._progress import (
    AbstractFitProgress as AbstractFitProgress,
    NoFitProgress as NoFitProgress,
    TqdmFitProgress as TqdmFitProgress,
)
from ._solver import (
    RK4 as RK4,
    AbstractLTCFormTerm as AbstractLTCFormTerm,
    FusedLTC as FusedLTC,
    LTCTerm as LTCTerm,
)
from ._solver.stability import real_stability_bound as real_stability_bound
from ._train import fit as fit
from ._vector_field import (
    AbstractLTCField as AbstractLTCField,
    BiophysicalLTCVectorField as BiophysicalLTCVectorField,
    LTCVectorField as LTCVectorField,
)
from ._wiring import (
    Wiring as Wiring,
    auto_ncp as auto_ncp,
    fully_connected as fully_connected,
    make_wiring as make_wiring,
    ncp as ncp,
    random_wiring as random_wiring,
)


__version__ = importlib.metadata.version("ltc_jax")

__all__ = [
    # Models and vector fields
    "LTC",
    "CfC",
    "CfCCell",
    "ltc_closed_form_step",
    "LinearReadout",
    "MotorReadout",
    "AbstractLTCField",
    "LTCVectorField",
    "BiophysicalLTCVectorField",
    "Wiring",
    "make_wiring",
    "fully_connected",
    "random_wiring",
    "ncp",
    "auto_ncp",
    # Inputs
    "InputPath",
    "Batch",
    "make_input_path",
    "make_batch",
    "batches",
    "abstract_batch",
    # Solving
    "Integrator",
    "make_integrator",
    "fixed_max_steps",
    "derive_defaults",
    "DataDefaults",
    "batch_stop_ratio",
    "observation_spacing",
    "check_stability",
    "StabilityWarning",
    "real_stability_bound",
    "with_tolerances",
    "ToleranceSchedule",
    "make_solver",
    "make_adjoint",
    "SOLVER_NAMES",
    "ADJOINT_NAMES",
    "WindowedBacksolveAdjoint",
    "default_windows",
    "resolve_windows",
    "RK4",
    "FusedLTC",
    "LTCTerm",
    "AbstractLTCFormTerm",
    "integrate",
    "Trajectory",
    # Training
    "loss_and_metrics",
    "make_train_step",
    "make_optimizer",
    "fit",
    "data_mesh",
    "replicate",
    "shard_batch",
    "evaluate",
    "AbstractFitProgress",
    "TqdmFitProgress",
    "NoFitProgress",
    "failure_reason",
    "save_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "list_checkpoints",
    "parameter_digest",
    # Errors
    "SolverFailureError",
    "NonFiniteLossError",
    "DivergenceError",
    "TrainingFailedError",
    "CheckpointError",
    "SubprocessError",
    # Measurement
    "measure",
    "Measurement",
    "compiled_memory",
    "CompiledMemory",
    "runtime_peak_bytes",
    "device_memory_stats",
    "process_peak_bytes",
    "process_resident_bytes",
    "reset_process_peak",
    "release_free_memory",
    "counted_solve",
    "count_evaluations",
    "time_calls",
    "loss_gradient",
    "flatten_gradient",
    "gradient_relative_error",
    "call_in_subprocess",
    "environment",
    # Subpackages
    "datasets",
]
