"""Defaults derived from the data, the stratified validation split, early
stopping and the non-learning warning."""

import dataclasses
import warnings

import equinox as eqx
import jax
import jaxtyping
import numpy as np
import optax
import pytest
from helpers import max_relative_error, quiet_fit

import ltc_jax
from ltc_jax.datasets import SequenceDataset, stratified_split


def _grid(n, times, spacing, labels=None, lengths=None):
    """`n` sequences on a regular grid of `spacing` time units."""
    rng = np.random.default_rng(0)
    ts = np.broadcast_to(np.arange(times) * spacing, (n, times)).copy()
    return SequenceDataset(
        ts=ts,
        xs=rng.normal(size=(n, times, 2)),
        lengths=np.full(n, times, np.int32) if lengths is None else lengths,
        labels=rng.integers(0, 2, n).astype(np.int32) if labels is None else labels,
        class_names=("a", "b"),
    )


@pytest.mark.parametrize(
    "spacing, unit", [(1.0, "sample index"), (0.004, "seconds at 250 Hz"), (4.0, "ms")]
)
def test_derived_defaults_follow_the_time_scale(spacing, unit):
    """By hand: 100 observations at `spacing` last 99 spacings; tau from a tenth
    of the spacing to that duration; RK4's dt0 shortened to 0.9 * 2.785 *
    tau_low / (1 + tau_low); 16 steps per observation, at least 256; 320
    sequences give batch 2**round(log2(20)) = 16, so 20 optimiser steps an
    epoch and 4000 / 20 = 200 epochs."""
    data = _grid(320, 100, spacing)
    defaults = ltc_jax.training.derive_defaults([data])
    assert defaults.spacing == pytest.approx(spacing)
    assert defaults.tau_init == pytest.approx((spacing / 10, 99 * spacing))
    assert defaults.dt0 == pytest.approx(spacing)
    assert defaults.max_steps == 1600 and defaults.batch_size == 16
    assert defaults.epochs == 200
    # RK4's stability polynomial R(z) = 1 + z + z^2/2 + z^3/6 + z^4/24 stays in
    # [-1, 1] on the real axis up to the edge x where R(-x) = 1, that is the real
    # root of x^3 - 4x^2 + 12x - 24 = 0 (R(-x) - 1 = x (x^3 - 4x^2 + 12x - 24) / 24).
    (edge,) = [r.real for r in np.roots([1, -4, 12, -24]) if abs(r.imag) < 1e-9]
    rk4 = ltc_jax.training.real_stability_bound(ltc_jax.make_solver("rk4"))
    assert rk4 == pytest.approx(edge, rel=1e-9)
    stable = ltc_jax.training.derive_defaults([data], stability_bound=rk4).dt0
    # The fastest decay, 1 / tau_low + 1, times the step: 10% inside the edge,
    # where RK4 damps it (|R| < 1), and shorter than the data's own spacing.
    x = stable * (1 / (spacing / 10) + 1)
    assert x == pytest.approx(0.9 * edge, rel=1e-9) and stable < spacing
    assert abs(1 - x + x**2 / 2 - x**3 / 6 + x**4 / 24) < 1
    # A hundredth of the spacing: a tenth of the fastest initial time constant.
    assert defaults.tau_min == pytest.approx(spacing / 100)
    assert set(defaults.reasons) == {
        "tau_init",
        "tau_min",
        "dt0",
        "max_steps",
        "batch_size",
        "epochs",
        "batching",
        "readout_times",
    }
    # One grid: one batched solve; readout at 16 of the 100 observations' times,
    # or at 64 for a pooled readout.
    assert defaults.batching == "batched" and defaults.readout_times == 16
    assert (
        ltc_jax.training.derive_defaults(
            [data], readout_features="pooled"
        ).readout_times
        == 64
    )
    assert (
        ltc_jax.training.derive_defaults([data], readout_features="both").readout_times
        == 16
    )


def test_derived_defaults_of_short_irregular_data():
    """Median spacing over irregular gaps; short sequences keep tau up to ten
    spacings; 1,000 observations allow 16,000 steps; 40 sequences, batch 8,
    so 5 optimiser steps an epoch and 800 epochs; a given batch of 3 takes 14
    steps an epoch, ceil(4000 / 14) = 286 epochs; over 3 devices the derived
    batch of 8 becomes 9, 5 steps an epoch again, 800 epochs."""
    data = _grid(40, 1000, 1.0)
    ts = np.cumsum(np.tile([0.5, 1.5, 1.0], (40, 334))[:, :1000], axis=1)
    data = SequenceDataset(
        ts=ts,
        xs=data.xs,
        lengths=data.lengths,
        labels=data.labels,
        class_names=("a", "b"),
    )
    defaults = ltc_jax.training.derive_defaults([data])
    assert defaults.spacing == 1.0  # median of 0.5, 1.5, 1.0, ...
    assert defaults.max_steps == 16_000 and defaults.batch_size == 8
    assert defaults.epochs == 800
    # 40 / 16 = 2.5 sequences a step, raised to the smallest batch, 8; over 3
    # devices 9: ceil(40 / 9) = 5 steps either way.
    assert "(clamped to 8: 5 steps per epoch)" in defaults.reasons["batch_size"]
    assert ltc_jax.training.derive_defaults([data], batch_size=3).epochs == 286
    few = ltc_jax.training.derive_defaults([data.take(np.arange(6))])
    assert "(clamped to 8: 1 step per epoch)" in few.reasons["batch_size"]
    split = ltc_jax.training.derive_defaults([data], batch_multiple=3)
    assert (split.batch_size, split.epochs) == (9, 800)
    assert split.reasons["batch_size"].endswith(
        "(clamped to 8, rounded up to a multiple of 3 (the devices): 5 steps per epoch)"
    )
    # A ValueError, or under the tests' runtime type checks the Literal's own.
    with pytest.raises((ValueError, jaxtyping.TypeCheckError), match="readout_f"):
        ltc_jax.training.derive_defaults([data], readout_features="pool")
    short = ltc_jax.training.derive_defaults([_grid(40, 4, 1.0)])
    assert short.tau_init == (0.1, 10.0) and short.max_steps == 256


def test_batching_follows_how_many_times_a_batch_shares():
    """By hand: on one grid (ragged lengths of the sample index) a batch stops at
    its longest sequence's times, ratio 1; times offset by a per-sequence
    fraction of the spacing never coincide, so a batch of 8 stops 8 times as
    often: a solve per sequence. Fixed steps are always batched; the readout
    times stop at the median length (here 3)."""
    lengths = np.array([3, 5, 4, 3] * 10, np.int32)
    data = _grid(40, 5, 1.0, lengths=lengths)
    assert ltc_jax.training.batch_stop_ratio(data, 8) == pytest.approx(1.0)
    shifted = SequenceDataset(
        ts=data.ts * (1 + np.arange(40)[:, None] / 1000),
        xs=data.xs,
        lengths=np.full(40, 5, np.int32),
        labels=data.labels,
        class_names=("a", "b"),
    )
    # Each sequence's times start at 0, so the first of its 5 is shared: 1 + 8 * 4.
    assert ltc_jax.training.batch_stop_ratio(shifted, 8) == pytest.approx(33 / 5)
    assert ltc_jax.training.derive_defaults([data]).batching == "batched"
    assert ltc_jax.training.derive_defaults([shifted]).batching == "vmap"
    assert (
        ltc_jax.training.derive_defaults([shifted], adaptive=False).batching
        == "batched"
    )
    assert ltc_jax.training.derive_defaults([data]).readout_times == 3


def test_stratified_split_keeps_class_shares_and_is_disjoint():
    labels = np.array([0] * 30 + [1] * 10, dtype=np.int32)
    data = _grid(40, 3, 1.0, labels=labels)
    rest, held = stratified_split(data, 0.2, seed=3)
    assert np.bincount(held.labels).tolist() == [6, 2]
    assert np.bincount(rest.labels).tolist() == [24, 8]
    together = np.concatenate([rest.xs, held.xs]).reshape(40, -1)
    assert len({row.tobytes() for row in together}) == 40  # disjoint, complete
    with pytest.raises(ValueError, match="fraction"):
        stratified_split(data, 1.0)


def test_stratified_folds_hold_each_sequence_out_once_in_class_shares():
    """40 sequences (30 of one class, 10 of the other) in 4 folds: each held out
    exactly once, 7 or 8 of the first class and 2 or 3 of the second per fold
    (the deal runs on from class to class), 10 per fold, each fold's rest the
    other 30; a regression set deals all together."""
    labels = np.array([0] * 30 + [1] * 10, dtype=np.int32)
    data = _grid(40, 3, 1.0, labels=labels)
    key = {row.tobytes(): i for i, row in enumerate(data.xs.reshape(40, -1))}
    held_count = np.zeros(40, int)
    for rest, held in ltc_jax.datasets.stratified_folds(data, 4, seed=1):
        assert len(held) == 10 and len(rest) == 30
        assert sorted(np.bincount(held.labels).tolist()) in ([2, 8], [3, 7])
        inside = [key[row.tobytes()] for row in held.xs.reshape(len(held), -1)]
        outside = [key[row.tobytes()] for row in rest.xs.reshape(len(rest), -1)]
        assert not set(inside) & set(outside)
        held_count[inside] += 1
    assert held_count.tolist() == [1] * 40
    targets = SequenceDataset.from_sequences(
        [np.arange(3.0)] * 5, [np.ones((3, 1))] * 5, np.arange(5.0)[:, None]
    )
    sizes = [len(h) for _, h in ltc_jax.datasets.stratified_folds(targets, 2)]
    assert sorted(sizes) == [2, 3]
    for folds in (1, 41):
        with pytest.raises(ValueError, match=r"folds must lie in \[2, 40\]"):
            ltc_jax.datasets.stratified_folds(data, folds)
    unlabelled = _grid(4, 3, 1.0, labels=np.array([-1, 0, 1, -1], np.int32))
    with pytest.raises(ValueError, match="labels outside its 2 classes"):
        ltc_jax.datasets.stratified_folds(unlabelled, 2)


def test_best_mean_epoch_averages_the_epochs_every_fold_reached():
    """Losses by hand: fold a 3, 2, 1.5, 4; fold b (stopped early) 1, 2, 2.
    Over the three common epochs the means are 2, 2, 1.75: three epochs. A tie
    keeps the fewest; a history without validation is refused."""

    def history(losses):
        return [dict(epoch=e, validation_loss=loss) for e, loss in enumerate(losses)]

    epochs, means = ltc_jax.training.best_mean_epoch(
        [history([3, 2, 1.5, 4]), history([1, 2, 2])]
    )
    assert (epochs, means) == (3, (2.0, 2.0, 1.75))
    assert ltc_jax.training.best_mean_epoch([history([1, 1])])[0] == 1
    with pytest.raises(ValueError, match="finite validation loss"):
        ltc_jax.training.best_mean_epoch([[dict(epoch=1, loss=0.5)]])
    with pytest.raises(ValueError, match="at least one history"):
        ltc_jax.training.best_mean_epoch([])


def _heun():
    """Heun at an eighth of the grid spacing: the integrator these tests train with."""
    return ltc_jax.make_integrator("heun", dt0=0.125, max_steps=64)


def _fit(model, data, validation, **kwargs):
    return quiet_fit(
        model,
        data,
        _heun(),
        optimizer=ltc_jax.training.make_optimizer(5e-2, 40),
        batch_size=8,
        validation=validation,
        **kwargs,
    )


def _stopping_epoch(losses, patience):
    """The epoch after which early stopping must end training: the first at
    which `patience` epochs have passed since the lowest validation loss so
    far; `None` if there is none."""
    best = 0
    for epoch, loss in enumerate(losses):
        if loss < losses[best]:
            best = epoch
        if epoch - best == patience:
            return epoch
    return None


def test_early_stopping_returns_the_best_epoch(getkey):
    """Training stops at the epoch the recorded validation losses and the
    patience give (here well before the 8 epochs asked for), and the model
    returned is the one whose validation loss was lowest: its validation loss,
    evaluated again, is the history's minimum."""
    data = _grid(24, 6, 1.0)
    train, validation = stratified_split(data, 0.25)
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    best, history = _fit(model, train, validation, epochs=8, patience=2)
    losses = [h["validation_loss"] for h in history]
    stop = _stopping_epoch(losses, patience=2)
    assert stop is not None and stop < 7  # this run does stop early
    assert [h["epoch"] for h in history] == list(range(stop + 1))
    (marked,) = [h["epoch"] for h in history if h["best"]]
    assert marked == int(np.argmin(losses))
    again = ltc_jax.evaluate(best, validation, integrator=_heun(), batch_size=8)
    assert again["loss"] == pytest.approx(min(losses), rel=1e-12)


def test_resume_with_validation_is_bit_exact(getkey, tmp_path):
    data = _grid(24, 6, 1.0)
    train, validation = stratified_split(data, 0.25)
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    reference, reference_history = _fit(model, train, validation, epochs=4)
    _fit(model, train, validation, epochs=2, checkpoint_dir=tmp_path)
    resumed, history = _fit(
        model, train, validation, epochs=4, checkpoint_dir=tmp_path, resume=True
    )
    assert max_relative_error(resumed, reference) == 0.0
    assert [h["validation_loss"] for h in history] == [
        h["validation_loss"] for h in reference_history
    ]


def test_a_run_that_does_not_learn_says_so(getkey):
    """A learning rate of zero cannot lower the loss. The warning names the
    line that called `fit` (here, in the tests' helper), not a line inside
    ltc_jax or Equinox."""
    import helpers

    data = _grid(16, 5, 1.0)
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    with pytest.warns(UserWarning, match="did not lower the loss") as caught:
        integrator = _heun()
        _, history = quiet_fit(
            model, data, integrator, optimizer=optax.sgd(0.0), epochs=2, batch_size=8
        )
    assert history[-1]["learned"] is False
    (warning,) = [w for w in caught if "did not lower" in str(w.message)]
    assert warning.filename == helpers.__file__
    # The CfC has no time constants: the warning does not send you to them.
    cfc = ltc_jax.CfC(2, 4, 2, backbone_units=4, key=getkey())
    with pytest.warns(UserWarning, match="did not lower the loss") as caught:
        quiet_fit(
            cfc, data, integrator, optimizer=optax.sgd(0.0), epochs=2, batch_size=16
        )
    (warning,) = [w for w in caught if "did not lower" in str(w.message)]
    assert "tau" not in str(warning.message) and "learning rate" in str(warning.message)
    # One optimiser step: its epoch's loss is the first step's; nothing to say.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, history = quiet_fit(
            model, data, integrator, optimizer=optax.sgd(0.0), epochs=1, batch_size=16
        )
    assert len(history) == 1 and "learned" not in history[-1]


def test_the_main_job_steps_within_the_stability_bound_of_a_given_tau_init():
    """`--solver rk4 --tau-init 0.001 1` without `--dt0`: the derived step is
    0.9 x RK4's bound over the fastest decay 1/0.001 + 1, not the data's."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.settings import resolve_settings

    data = _grid(32, 10, 1.0)
    config = TrainConfig(solver="rk4", tau_init=(0.001, 1.0))
    settings = resolve_settings(config, data)
    rk4 = ltc_jax.training.real_stability_bound(ltc_jax.make_solver("rk4"))
    assert settings["dt0"] == pytest.approx(0.9 * rk4 * 0.001 / 1.001)
    assert not settings["adaptive"] and "tau_init" not in settings["derived"]
    derived = resolve_settings(TrainConfig(solver="rk4"), data)
    assert derived["dt0"] == pytest.approx(0.9 * rk4 * 0.1 / 1.1)
    assert derived["max_steps"] == ltc_jax.training.fixed_max_steps(
        [data], derived["dt0"]
    )
    # 32 sequences in batches of 8: 4 steps an epoch, 1000 epochs; given, kept.
    assert derived["epochs"] == 1000 and derived["derived"]["epochs"]["reason"]
    given = resolve_settings(TrainConfig(solver="rk4", epochs=3), data)
    assert given["epochs"] == 3 and "epochs" not in given["derived"]


def test_the_main_job_records_the_readout_gate_and_rate_it_chose():
    """Left out, the readout's features, the gate's bias and the learning rate
    are recorded with their reasons: both, chrono and 1e-2 for the LTC, the
    states and no bias for the biophysical cell, no bias and 1e-3 for the CfC;
    given, they are not derived."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.settings import resolve_settings

    data = _grid(32, 10, 0.5)

    def derived(**options):
        chosen = resolve_settings(TrainConfig(**options), data)["derived"]
        names = {"readout_features", "gate_bias_init", "learning_rate"}
        names &= set(chosen)
        assert all(chosen[name]["reason"] for name in names)
        return {name: chosen[name]["value"] for name in names}

    ltc = dict(readout_features="both", gate_bias_init="chrono", learning_rate=1e-2)
    assert derived() == ltc
    assert derived(cell="biophysical") == dict(
        readout_features="states", learning_rate=1e-2
    )
    assert derived(model="cfc") == dict(readout_features="both", learning_rate=1e-3)
    given = dict(readout_features="pooled", gate_bias_init="zero", learning_rate=0.1)
    assert derived(**given) == {}


def test_the_main_job_trains_the_same_cfc_whatever_the_unit_of_the_times():
    """The main job's CfC takes the median observation interval (NumPy's, of
    the irregular training times) as its time scale, recorded with its reason,
    and reads a time-since-observation channel in that unit too, so the same
    data in seconds and in milliseconds train the same parameters; a time
    scale given is kept, and refused for a model that has none."""
    from ltc_jax.app import TrainConfig, prepare
    from ltc_jax.app.settings import resolve_settings

    rng = np.random.default_rng(3)
    n, times = 16, 7
    seconds = np.cumsum(rng.uniform(0.2, 1.4, (n, times)), axis=1)
    xs = rng.normal(size=(n, times, 2))
    xs[rng.uniform(size=xs.shape) < 0.3] = np.nan  # gaps for the channel
    xs[:, 0] = 0.0  # every channel of every series observed
    labels = rng.integers(0, 2, n).astype(np.int32)
    trained = []
    for unit in (1.0, 1000.0):
        data = SequenceDataset(
            ts=seconds * unit,
            xs=xs,
            lengths=np.full(n, times, np.int32),
            labels=labels,
            class_names=("a", "b"),
        )
        config = TrainConfig(
            model="cfc",
            hidden_size=4,
            backbone_units=5,
            epochs=2,
            time_since_observation=True,
        )
        job = prepare(config, data)
        spacing = float(np.median(np.diff(seconds, axis=1))) * unit
        assert job.derived["time_scale"]["value"] == pytest.approx(spacing, rel=1e-12)
        assert "median observation interval" in job.derived["time_scale"]["reason"]
        assert job.model.time_scale == pytest.approx(spacing, rel=1e-12)
        # The channel's 0.1 to 2.8 s gaps, in median intervals (GRU-D's delta
        # by NumPy: each gap, plus the delta before it where that was missing).
        delta = np.zeros((n, times, 2))
        for i in range(1, times):
            gap = (seconds[:, i] - seconds[:, i - 1])[:, None]
            missing = np.isnan(xs[:, i - 1])
            delta[:, i] = gap + np.where(missing, delta[:, i - 1], 0.0)
        channel = np.asarray(job.path.interpolation.ys)[..., 2:]
        np.testing.assert_allclose(channel, delta * unit / spacing, rtol=1e-9)
        model, _ = quiet_fit(
            job.model,
            data,
            job.integrator,
            optimizer=job.optimizer,
            epochs=job.epochs,
            batch_size=job.batch_size,
            seed=job.seed,
            path=job.path,
        )
        trained.append(eqx.filter(model, eqx.is_inexact_array))
    for in_seconds, in_ms in zip(*map(jax.tree.leaves, trained), strict=True):
        np.testing.assert_allclose(in_seconds, in_ms, rtol=1e-9, atol=1e-12)
    given = prepare(dataclasses.replace(config, time_scale=0.5), data)
    assert given.model.time_scale == 0.5 and "time_scale" not in given.derived
    with pytest.raises(ValueError, match="--time-scale sets the unit of elapsed"):
        TrainConfig(time_scale=0.5).check()
    TrainConfig(time_scale=0.5, time_since_observation=True).check()
    for model in ("ltc", "jump"):  # their channel takes the unit; nothing else
        for channel in (True, False):
            chosen = resolve_settings(
                TrainConfig(model=model, time_since_observation=channel), data
            )
            assert ("time_scale" in chosen["derived"]) == channel
    with pytest.raises(ValueError, match="--time-scale must be positive"):
        TrainConfig(model="cfc", time_scale=0.0).check()


@pytest.mark.parametrize(
    "options, solver",
    [
        (dict(), "fused"),
        (dict(adjoint="full"), "fused"),
        (dict(rtol=1e-4), "tsit5"),
        (dict(dtmin=1e-3), "tsit5"),
        (dict(adjoint="windowed"), "tsit5"),
        (dict(adjoint="backsolve", backward_solver="heun"), "tsit5"),
        (dict(adjoint="windowed", seminorm=True), "tsit5"),
        (dict(solver="rk4"), "rk4"),
    ],
)
def test_the_main_job_derives_its_solver(options, solver):
    """Without `--solver`: the fused step at one step per observation interval
    (the median spacing, 0.5 here), unless error control or a reverse solve
    (whatever its backward solver) asks for an adaptive ODE solver."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.settings import resolve_settings

    data = _grid(32, 10, 0.5)
    settings = resolve_settings(TrainConfig(**options), data)
    assert settings["solver"] == solver
    assert ("solver" in settings["derived"]) == ("solver" not in options)
    assert settings["adaptive"] == (solver == "tsit5")
    if solver == "fused":
        assert settings["dt0"] == 0.5
        assert settings["max_steps"] == 9  # 10 observations 0.5 apart: 4.5 / 0.5


@pytest.mark.parametrize(
    "class_sizes, given, expected, held",
    [
        ((30,) * 9, None, 0.0, 27),  # JapaneseVowels' shape: 3 of each class
        ((333, 333, 334), None, 0.0, 99),  # 33 + 33 + 33, rounded per class
        ((500, 500), None, 0.1, 100),  # 50 + 50
        ((5, 5), 0.25, 0.25, None),  # given: kept, whatever the size
        ((600, 600), 0.0, 0.0, None),
    ],
)
def test_the_main_job_holds_out_a_validation_share_of_at_least_100(
    class_sizes, given, expected, held
):
    """The share is judged on what the stratified split holds out (rounded per
    class, counted here by hand), not on 10% of the total."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.settings import validation_share

    labels = np.repeat(np.arange(len(class_sizes)), class_sizes)
    n = len(labels)
    train = SequenceDataset(
        ts=np.tile(np.arange(3.0), (n, 1)),
        xs=np.zeros((n, 3, 1)),
        lengths=np.full(n, 3),
        labels=labels,
        class_names=tuple(str(c) for c in range(len(class_sizes))),
    )
    fraction, reason = validation_share(TrainConfig(validation_fraction=given), train)
    assert fraction == expected
    if held is None:
        assert reason == "given"
    else:
        assert f"hold out {held}," in reason or f"holds out {held}," in reason
        assert (" under 100" in reason) == (held < 100)
