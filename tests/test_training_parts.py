"""Training from parts: a penalty, a generator of batches, an initial state and
checkpoints of an earlier format, each through the public API alone."""

import json
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import max_relative_error, quiet_fit

import ltc_jax
from ltc_jax.datasets import SequenceDataset


def _dataset(n=10, times=9, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, times + 1, n).astype(np.int32)
    ts = np.broadcast_to(np.arange(times, dtype=float), (n, times)).copy()
    xs = rng.normal(size=(n, times, 2))
    return SequenceDataset(
        ts=ts,
        xs=xs,
        lengths=lengths,
        labels=rng.integers(0, 2, n).astype(np.int32),
        class_names=("a", "b"),
    )


def _perturbed(model, key, scale):
    params, static = eqx.partition(model, eqx.is_inexact_array)
    leaves, treedef = jax.tree.flatten(params)
    keys = jr.split(key, len(leaves))
    moved = [
        x + scale * jr.normal(k, x.shape, x.dtype)
        for x, k in zip(leaves, keys, strict=True)
    ]
    return eqx.combine(jax.tree.unflatten(treedef, moved), static)


HEUN = dict(solver="heun", dt0=0.25, max_steps=64)


def test_a_penalty_composes_onto_the_loss_and_its_gradient_is_exact(getkey):
    """EWC's quadratic anchor added through the public API: its value is a NumPy
    transcription of 0.5 * strength * sum(F * (theta - anchor)^2), and the
    penalised objective's gradient agrees with central finite differences in
    float64 along random directions."""
    model = ltc_jax.LTC(2, 3, 2, key=getkey())
    anchor = _perturbed(model, getkey(), 0.3)
    weights = jax.tree.map(
        lambda x: jnp.abs(x) + 0.5, eqx.filter(model, eqx.is_inexact_array)
    )
    penalty = ltc_jax.training.QuadraticPenalty(anchor, weights, strength=0.7)
    objective = ltc_jax.training.Penalized(ltc_jax.training.SupervisedLoss(), penalty)
    batch = ltc_jax.make_batch(_dataset())
    integrator = ltc_jax.make_integrator(**HEUN)

    def arrays(tree):
        return [
            np.asarray(x)
            for x in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array))
        ]

    expected = (
        0.5
        * 0.7
        * sum(
            np.sum(f * (p - a) ** 2)
            for p, a, f in zip(
                arrays(model), arrays(anchor), arrays(weights), strict=True
            )
        )
    )
    loss, metrics = objective(model, batch, integrator)
    data_loss, data_metrics = ltc_jax.training.SupervisedLoss()(
        model, batch, integrator
    )
    assert float(loss - data_loss) == pytest.approx(expected, rel=1e-12)
    assert float(metrics["penalty"] / metrics["weight"]) == pytest.approx(
        expected, rel=1e-12
    )
    assert float(metrics["loss"]) == float(data_metrics["loss"])  # the data loss

    params, static = eqx.partition(model, eqx.is_inexact_array)

    def value(p):
        return objective(eqx.combine(p, static), batch, integrator)[0]

    gradient = eqx.filter_jit(jax.grad(value))(params)
    h = 1e-6

    def moved(direction, by):
        return jax.tree.map(lambda p, d: p + by * d, params, direction)

    for _ in range(3):
        direction = eqx.filter(_perturbed(model, getkey(), 1.0), eqx.is_inexact_array)
        direction = jax.tree.map(lambda d, p: d - p, direction, params)
        ahead, behind = value(moved(direction, h)), value(moved(direction, -h))
        numeric = float(ahead - behind) / (2 * h)
        analytic = sum(
            float(jnp.vdot(g, d))
            for g, d in zip(
                jax.tree.leaves(gradient), jax.tree.leaves(direction), strict=True
            )
        )
        assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_a_penalty_around_an_objective_without_a_weight_names_the_metrics(getkey):
    """A penalty scales its metric by the batch's weight: wrapping an objective
    whose metrics lack `weight` is refused with the metrics it gave, not a
    bare KeyError."""

    class Unweighted(ltc_jax.training.AbstractObjective):
        def __call__(self, model, batch, integrator):
            loss = jnp.sum(model.readout.bias**2)
            return loss, dict(loss=loss)

    model = ltc_jax.LTC(2, 3, 2, key=getkey())
    penalty = ltc_jax.training.QuadraticPenalty(model)
    objective = ltc_jax.training.Penalized(Unweighted(), penalty)
    batch = ltc_jax.make_batch(_dataset())
    integrator = ltc_jax.make_integrator(**HEUN)
    with pytest.raises(
        ValueError, match=r"Unweighted's metrics hold \['loss'\], not \['weight'\]"
    ):
        objective(model, batch, integrator)


def test_fit_takes_an_objective_and_records_its_penalty(getkey):
    """A penalty of strength 0 trains to the unpenalised run's bits (the
    composition adds nothing else), and the history holds the penalty's mean,
    which a positive strength makes positive once the model leaves its anchor."""
    model = ltc_jax.LTC(2, 3, 2, key=getkey())
    data, integrator = _dataset(), ltc_jax.make_integrator(**HEUN)
    free, free_history = quiet_fit(model, data, integrator, epochs=2, batch_size=5)

    def penalised(strength):
        penalty = ltc_jax.training.QuadraticPenalty(model, strength=strength)
        return ltc_jax.training.Penalized(ltc_jax.training.SupervisedLoss(), penalty)

    zero, zero_history = quiet_fit(
        model, data, integrator, epochs=2, batch_size=5, objective=penalised(0.0)
    )
    digest = ltc_jax.training.parameter_digest
    assert digest(zero) == digest(free)
    assert [h["loss"] for h in zero_history] == [h["loss"] for h in free_history]
    assert [h["penalty"] for h in zero_history] == [0.0, 0.0]
    _, history = quiet_fit(
        model, data, integrator, epochs=2, batch_size=5, objective=penalised(1.0)
    )
    assert history[0]["penalty"] > 0 and history[1]["penalty"] > history[0]["penalty"]


def test_train_on_a_generator_gives_fit_s_parameters_bit_for_bit(getkey):
    """Batches that arrive from a generator, in the order `fit` documents (a
    permutation drawn from (seed, epoch)), train to the same bits as `fit`."""
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    data, integrator = _dataset(), ltc_jax.make_integrator(**HEUN)
    optimizer = ltc_jax.training.make_optimizer(1e-2, total_steps=6)
    reference, history = quiet_fit(
        model, data, integrator, optimizer=optimizer, epochs=2, batch_size=4, seed=3
    )

    def arriving():
        path = ltc_jax.make_input_path(data)
        for epoch in range(2):
            order = np.random.default_rng([3, epoch]).permutation(len(data))
            yield from ltc_jax.batches(data, 4, order=order, path=path)

    state = ltc_jax.training.TrainState.create(model, optimizer)
    state = ltc_jax.train_on(
        state, arriving(), optimizer=optimizer, integrator=integrator
    )
    digest = ltc_jax.training.parameter_digest
    assert state.step == 6 and state.batch == 6
    assert digest(state.model) == digest(reference)
    assert state.first_loss is not None and np.isfinite(history[-1]["loss"])


def test_a_solve_continues_from_a_given_initial_state(getkey):
    """Solving [0, 4] and then [4, 8] from the state at 4 gives the state of one
    solve over [0, 8], with fixed steps that meet at 4 and a linear input whose
    pieces are the same either way."""
    n, times = 3, 9
    rng = np.random.default_rng(1)
    ts = jnp.asarray(np.arange(times, dtype=float))
    xs = jnp.asarray(rng.normal(size=(n, times, 2)))
    integrator = ltc_jax.make_integrator(**HEUN)
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    h_mid = model.solve(ltc_jax.InputPath(ts[:5], xs[:, :5]), integrator=integrator)
    second = ltc_jax.InputPath(ts[4:], xs[:, 4:])
    h_end = model.solve(second, integrator=integrator, y0=h_mid.ys).ys
    whole = ltc_jax.InputPath(ts, xs)
    reference = model.solve(whole, integrator=integrator).ys
    assert max_relative_error(h_end, reference) < 1e-12
    assert (
        max_relative_error(
            model(second, integrator=integrator, y0=h_mid.ys),
            model(whole, integrator=integrator),
        )
        < 1e-12
    )
    with pytest.raises(ValueError, match=r"y0 must be \(batch, hidden_size\)"):
        model.solve(whole, integrator=integrator, y0=jnp.zeros((n, 5)))


def test_a_new_run_refuses_a_folder_of_another_runs_checkpoints(getkey, tmp_path):
    """Without `resume`, a folder that holds checkpoints is refused, and left
    as it was: a new run there would mix its steps with the old run's, and
    pruning the oldest would delete its own."""
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    data, integrator = _dataset(), ltc_jax.make_integrator(**HEUN)
    options = dict(optimizer=ltc_jax.training.make_optimizer(1e-2, 9), seed=2)
    quiet_fit(
        model,
        data,
        integrator,
        epochs=2,
        batch_size=4,
        checkpoint_dir=tmp_path,
        **options,
    )
    before = ltc_jax.training.list_checkpoints(tmp_path)
    with pytest.raises(
        ValueError, match="already holds 2 checkpoint\\(s\\), the newest"
    ):
        quiet_fit(
            model,
            data,
            integrator,
            epochs=1,
            batch_size=5,
            checkpoint_dir=tmp_path,
            **options,
        )
    assert ltc_jax.training.list_checkpoints(tmp_path) == before


def test_a_checkpoint_of_the_earlier_format_resumes(getkey, tmp_path):
    """A run whose checkpoints were written before the training state (format
    1: `consecutive`, `initial_loss`, totals with `rejected`) resumes to the
    parameters of an uninterrupted run; an unknown format is named."""
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    data, integrator = _dataset(), ltc_jax.make_integrator(**HEUN)
    optimizer = ltc_jax.training.make_optimizer(1e-2, total_steps=9)
    options = dict(optimizer=optimizer, batch_size=4, seed=2)
    reference, _ = quiet_fit(model, data, integrator, epochs=3, **options)
    quiet_fit(model, data, integrator, epochs=1, checkpoint_dir=tmp_path, **options)
    (newest,) = ltc_jax.training.list_checkpoints(tmp_path)
    meta_path = os.path.join(newest, "meta.json")
    with open(meta_path) as file:
        meta = json.load(file)
    # A fresh epoch's totals as format 1 wrote them, under its own names.
    names = "weight loss correct num_steps rejected max_num_steps batches failures"
    totals = dict.fromkeys(names.split(), 0.0)
    old = dict(
        epoch=meta["epoch"],
        batch=meta["batch"],
        history=meta["history"],
        totals=totals,
        consecutive=0,
        best_epoch=None,
        best_loss=None,
        initial_loss=meta["first_loss"],
        seed=2,
        step=meta["step"],
        sha256=meta["sha256"],
    )
    with open(meta_path, "w") as file:
        json.dump(old, file)
    resumed, history = quiet_fit(
        model,
        data,
        integrator,
        epochs=3,
        checkpoint_dir=tmp_path,
        resume=True,
        **options,
    )
    digest = ltc_jax.training.parameter_digest
    assert digest(resumed) == digest(reference) and len(history) == 3
    newest = ltc_jax.training.list_checkpoints(tmp_path)[-1]
    with open(os.path.join(newest, "meta.json")) as file:
        meta = json.load(file)
    with open(os.path.join(newest, "meta.json"), "w") as file:
        json.dump(dict(meta, format=7), file)
    with pytest.raises(ltc_jax.CheckpointError, match="checkpoint format 7"):
        quiet_fit(
            model,
            data,
            integrator,
            epochs=4,
            checkpoint_dir=tmp_path,
            resume=True,
            **options,
        )


class _MeanAbsoluteError(ltc_jax.training.AbstractObjective):
    """An objective of one's own reporting only what every objective must:
    the batch's weight and its weighted sum of losses (no solver steps)."""

    keys: tuple = ("weight", "loss")

    def __call__(self, model, batch, integrator):
        trajectory = model.solve(batch.path, integrator=integrator)
        outputs = model.outputs(trajectory.ys)
        per_sequence = jnp.mean(jnp.abs(outputs - batch.labels), -1)
        total, weight = jnp.sum(batch.weights * per_sequence), jnp.sum(batch.weights)
        metrics = dict(weight=weight, loss=total)
        return total / weight, {k: metrics[k] for k in self.keys} | dict(mae=total)


def test_an_objective_without_solver_steps_trains_evaluates_and_names_missing_keys(
    getkey,
):
    """An objective reporting only `weight` and `loss` trains with validation
    and evaluates, its steps NaN (not 0, which the step-budget check misread
    as a solve far below max_steps); its loss is the mean absolute error,
    checked against NumPy. One without `loss` is refused naming the keys."""
    data = _dataset()
    targets = np.random.default_rng(1).normal(size=(len(data), 2))
    data = SequenceDataset(data.ts, data.xs, data.lengths, targets)
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    integrator = ltc_jax.make_integrator("rk4", dt0=0.5, max_steps=32)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "took at most 0 of max_steps"
        trained, history = quiet_fit(
            model,
            data,
            integrator,
            epochs=2,
            batch_size=5,
            objective=_MeanAbsoluteError(),
            validation=data,
        )
    assert np.isnan(history[-1]["num_steps"]) and np.isnan(history[-1]["max_num_steps"])
    result = ltc_jax.evaluate(
        trained, data, integrator=integrator, objective=_MeanAbsoluteError()
    )
    outputs = np.asarray(trained(ltc_jax.make_input_path(data), integrator=integrator))
    np.testing.assert_allclose(
        result["loss"], np.mean(np.abs(outputs - targets)), rtol=1e-5
    )
    assert np.isnan(result["num_steps"])
    missing = r"metrics hold \['mae', 'weight'\], not \['loss'\]"
    with pytest.raises(ValueError, match=missing):
        quiet_fit(model, data, integrator, objective=_MeanAbsoluteError(("weight",)))


def test_a_run_whose_every_step_failed_says_so(getkey):
    """Every solve runs out of max_steps and the policy skips each failure: the
    run warns that no step succeeded, and its last record says it did not
    learn; the model returned is the one it started from."""
    data = _dataset()
    model = ltc_jax.LTC(2, 4, 2, key=getkey())
    starved = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4, max_steps=2)
    with pytest.warns(UserWarning, match="No optimiser step of the run succeeded: "
                      "each of its 4 steps failed"):  # fmt: skip
        trained, history = quiet_fit(
            model,
            data,
            starved,
            epochs=2,
            batch_size=5,
            on_failure=ltc_jax.training.SkipFailures(10),
        )
    assert history[-1]["learned"] is False and history[-1]["failures"] == 2
    assert eqx.tree_equal(trained, model)
