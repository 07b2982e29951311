"""ltc_jax: Liquid Time-Constant networks in JAX, with memory-efficient gradients.

The public API is everything imported here; other modules are internal.
"""

import importlib.metadata

from . import datasets as datasets
from ._fused import FusedLTC as FusedLTC, LTCTerm as LTCTerm
from ._integrate import Trajectory as Trajectory, integrate as integrate
from ._measure import (
    Measurement as Measurement,
    counted_solve as counted_solve,
    flatten_gradient as flatten_gradient,
    gradient_relative_error as gradient_relative_error,
    loss_gradient as loss_gradient,
    measure as measure,
)
from ._memory import (
    CompiledMemory as CompiledMemory,
    compiled_memory as compiled_memory,
    device_memory_stats as device_memory_stats,
    process_peak_bytes as process_peak_bytes,
    reset_process_peak as reset_process_peak,
    runtime_peak_bytes as runtime_peak_bytes,
)
from ._model import (
    LTC as LTC,
    LinearReadout as LinearReadout,
    MotorReadout as MotorReadout,
)
from ._paths import InputPath as InputPath
from ._run import (
    TrainConfig as TrainConfig,
    environment as environment,
    make_run_dir as make_run_dir,
    train_and_evaluate as train_and_evaluate,
)
from ._solve import (
    ADJOINT_NAMES as ADJOINT_NAMES,
    RK4 as RK4,
    SOLVER_NAMES as SOLVER_NAMES,
    Integrator as Integrator,
    ToleranceSchedule as ToleranceSchedule,
    make_adjoint as make_adjoint,
    make_integrator as make_integrator,
    make_solver as make_solver,
    with_tolerances as with_tolerances,
)
from ._subprocess import (
    SubprocessError as SubprocessError,
    call_in_subprocess as call_in_subprocess,
)
from ._train import (
    Batch as Batch,
    CheckpointError as CheckpointError,
    NonFiniteLossError as NonFiniteLossError,
    SolverFailureError as SolverFailureError,
    TrainingFailedError as TrainingFailedError,
    batches as batches,
    dataset_path as dataset_path,
    epoch_order as epoch_order,
    evaluate as evaluate,
    failure_reason as failure_reason,
    fit as fit,
    list_checkpoints as list_checkpoints,
    load_checkpoint as load_checkpoint,
    load_latest_checkpoint as load_latest_checkpoint,
    loss_and_metrics as loss_and_metrics,
    make_optimizer as make_optimizer,
    make_train_step as make_train_step,
    parameter_digest as parameter_digest,
    save_checkpoint as save_checkpoint,
    train_step_fn as train_step_fn,
)
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
