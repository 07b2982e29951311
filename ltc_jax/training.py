"""The parts training is composed of, for those who compose their own:
objectives and penalties, the training state, online learning, failure
policies, placements, monitors, progress, checkpoints, optimisers, tolerance
schedules, and the defaults derived from data.

[`ltc_jax.fit`][] is a thin composition of these around
[`ltc_jax.train_on`][]; a new loss term, failure policy or source of batches is
a new object here, not an edit to either (see the docs' "Extending ltc_jax").
"""

from ._adjoint import (
    default_windows as default_windows,
    resolve_windows as resolve_windows,
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
from ._failures import failure_reason as failure_reason
from ._fisher import (
    consolidate as consolidate,
    diagonal_fisher as diagonal_fisher,
)
from ._monitors import (
    AbstractMonitor as AbstractMonitor,
    Checkpointing as Checkpointing,
    LearningCheck as LearningCheck,
    StepBudget as StepBudget,
    Validation as Validation,
    best_mean_epoch as best_mean_epoch,
)
from ._objective import (
    AbstractObjective as AbstractObjective,
    Penalized as Penalized,
    QuadraticPenalty as QuadraticPenalty,
    SupervisedLoss as SupervisedLoss,
    make_train_step as make_train_step,
)
from ._online import (
    EWC as EWC,
    CarriedState as CarriedState,
    OnlineLearner as OnlineLearner,
    OnlineState as OnlineState,
    Replay as Replay,
    WindowBuffer as WindowBuffer,
    load_online_state as load_online_state,
    save_online_state as save_online_state,
)
from ._optimizer import make_optimizer as make_optimizer
from ._parallel import (
    AbstractPlacement as AbstractPlacement,
    DataParallel as DataParallel,
    SingleDevice as SingleDevice,
    data_mesh as data_mesh,
    replicate as replicate,
    shard_batch as shard_batch,
)
from ._policies import (
    AbstractFailurePolicy as AbstractFailurePolicy,
    RaiseOnFailure as RaiseOnFailure,
    SkipFailures as SkipFailures,
    StepFailure as StepFailure,
)
from ._progress import (
    NoFitProgress as NoFitProgress,
    TqdmFitProgress as TqdmFitProgress,
)
from ._solver.stability import (
    StabilityWarning as StabilityWarning,
    check_stability as check_stability,
    real_stability_bound as real_stability_bound,
)
from ._survival import (
    DiscreteHazardLoss as DiscreteHazardLoss,
    EventTimeLoss as EventTimeLoss,
    check_event_labels as check_event_labels,
)
from ._tolerances import (
    ToleranceSchedule as ToleranceSchedule,
    with_tolerances as with_tolerances,
)
from ._train_state import (
    TrainState as TrainState,
    load_train_state as load_train_state,
    save_train_state as save_train_state,
)


__all__ = [
    # The state and what is minimised
    "TrainState",
    "AbstractObjective",
    "SupervisedLoss",
    "Penalized",
    "QuadraticPenalty",
    "diagonal_fisher",
    "consolidate",
    "make_train_step",
    "make_optimizer",
    # Time to event
    "EventTimeLoss",
    "DiscreteHazardLoss",
    "check_event_labels",
    # Learning online from a stream
    "OnlineLearner",
    "OnlineState",
    "Replay",
    "EWC",
    "WindowBuffer",
    "CarriedState",
    "save_online_state",
    "load_online_state",
    # Failures and placement
    "AbstractFailurePolicy",
    "RaiseOnFailure",
    "SkipFailures",
    "StepFailure",
    "failure_reason",
    "AbstractPlacement",
    "SingleDevice",
    "DataParallel",
    "data_mesh",
    "replicate",
    "shard_batch",
    # Monitors and progress
    "AbstractMonitor",
    "Validation",
    "Checkpointing",
    "StepBudget",
    "LearningCheck",
    "TqdmFitProgress",
    "NoFitProgress",
    # Checkpoints
    "save_train_state",
    "load_train_state",
    "save_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "list_checkpoints",
    "parameter_digest",
    # Integration choices made for training
    "ToleranceSchedule",
    "with_tolerances",
    "check_stability",
    "StabilityWarning",
    "real_stability_bound",
    "resolve_windows",
    "default_windows",
    # Defaults derived from the data
    "derive_defaults",
    "DataDefaults",
    "fixed_max_steps",
    "observation_spacing",
    "batch_stop_ratio",
]
