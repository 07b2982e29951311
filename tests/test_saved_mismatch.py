"""Saved models and checkpoints loaded into a model built otherwise are refused
naming each option that differs; interrupted saves leave nothing behind."""

import dataclasses
import json
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest
from helpers import max_relative_error, toy_ts_file

import ltc_jax
from ltc_jax.training import (
    TrainState,
    load_checkpoint,
    load_train_state,
    save_checkpoint,
    save_train_state,
)


FIX = "Build the model with the saved options"


def _saved(tmp_path, model):
    """Checkpoint `model` as step 1 under `tmp_path`. **Returns:** its folder."""
    return save_checkpoint(tmp_path, 1, model, dict(epoch=1))


def test_ltc_with_another_hidden_size_is_named(tmp_path):
    folder = _saved(tmp_path, ltc_jax.LTC(2, 8, 2, key=jr.PRNGKey(0)))
    asked = ltc_jax.LTC(2, 16, 2, key=jr.PRNGKey(0))
    with pytest.raises(
        ltc_jax.CheckpointError, match="hidden_size 8 on disk, 16 asked"
    ):
        load_checkpoint(folder, asked)


def test_a_prefix_of_a_fit_checkpoint_names_the_option_that_differs(tmp_path):
    """A checkpoint of fit holds (model, opt_state, best_model); loading
    (model, opt_state) built with another hidden size names the option, as
    for the whole tree, before any array is read."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    optimizer = optax.adam(1e-3)
    state = TrainState.create(model, optimizer)
    folder = save_train_state(tmp_path, state)
    asked = ltc_jax.LTC(2, 8, 2, key=jr.PRNGKey(0))
    like = (asked, optimizer.init(eqx.filter(asked, eqx.is_inexact_array)))
    with pytest.raises(ltc_jax.CheckpointError, match="hidden_size 4 on disk, 8 asked"):
        load_checkpoint(folder, like)
    loaded, _ = load_checkpoint(folder, (model, state.opt_state))  # as saved
    assert eqx.tree_equal(loaded[0], model)


def test_ltc_with_other_readout_times_is_named(tmp_path):
    folder = _saved(tmp_path, ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0)))
    asked = ltc_jax.LTC(2, 4, 2, readout_times=3, key=jr.PRNGKey(0))
    with pytest.raises(ltc_jax.CheckpointError) as error:
        load_checkpoint(folder, asked)
    message = str(error.value)
    assert "readout_times 1 on disk, 3 asked" in message and FIX in message
    assert "hidden_size" not in message  # only what differs
    assert "\n" not in message


def test_ltc_in_another_float_dtype_is_named(tmp_path):
    """The tests run in float64; the model saved is cast to float32."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    single = jax.tree.map(
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, model
    )
    folder = _saved(tmp_path, single)
    with pytest.raises(
        ltc_jax.CheckpointError, match="dtype float32 on disk, float64 asked"
    ):
        load_checkpoint(folder, model)


def test_biophysical_cell_with_another_size_or_cell_is_named(tmp_path):
    saved = ltc_jax.LTC(2, 8, 2, cell="biophysical", key=jr.PRNGKey(0))
    folder = _saved(tmp_path, saved)
    asked = ltc_jax.LTC(2, 6, 2, cell="biophysical", key=jr.PRNGKey(0))
    with pytest.raises(ltc_jax.CheckpointError, match="hidden_size 8 on disk, 6 asked"):
        load_checkpoint(folder, asked)
    simplified = ltc_jax.LTC(2, 8, 2, key=jr.PRNGKey(0))
    with pytest.raises(
        ltc_jax.CheckpointError, match="cell biophysical on disk, ltc asked"
    ):
        load_checkpoint(folder, simplified)


def test_cfc_names_every_option_that_differs(tmp_path):
    """Another backbone depth changes the tree's structure (today Equinox's
    `TreePathError`); both differing options are named, and nothing else."""
    saved = ltc_jax.CfC(2, 8, 2, backbone_units=4, key=jr.PRNGKey(0))
    folder = _saved(tmp_path, saved)
    asked = ltc_jax.CfC(
        2, 16, 2, backbone_units=4, backbone_layers=2, key=jr.PRNGKey(0)
    )
    with pytest.raises(ltc_jax.CheckpointError) as error:
        load_checkpoint(folder, asked)
    differences = str(error.value).split(": ", 1)[1].split(". ")[0]
    assert differences == (
        "hidden_size 8 on disk, 16 asked; backbone_layers 1 on disk, 2 asked"
    )


def test_resume_names_the_option_once(tmp_path):
    """A training state holds the model twice (the model and the best model):
    the resume names the difference once."""
    optimizer = optax.adam(1e-3)
    saved = TrainState.create(ltc_jax.LTC(2, 8, 2, key=jr.PRNGKey(0)), optimizer)
    save_train_state(tmp_path, saved, seed=0)
    asked = TrainState.create(ltc_jax.LTC(2, 16, 2, key=jr.PRNGKey(0)), optimizer)
    with pytest.raises(ltc_jax.CheckpointError) as error:
        load_train_state(tmp_path, asked)
    assert str(error.value).count("hidden_size 8 on disk, 16 asked") == 1


def test_resume_with_another_optimizer_names_the_optimizer(tmp_path):
    """Resuming an Adam run with SGD (no state) or with SGD with momentum
    (one array per parameter, where Adam has two and a count) is refused
    naming the optimiser's arrays on both sides, before the saved arrays are
    read into the model's places; the same optimiser resumes."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    saved = TrainState.create(model, optax.adam(1e-3))
    save_train_state(tmp_path, saved, seed=0)
    parameters = len(jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array)))
    for optimizer, given in (
        (optax.sgd(1e-3), "no arrays."),
        (optax.sgd(1e-3, 0.9), f"{parameters} arrays, of shapes (4, 2)"),
    ):
        asked = TrainState.create(model, optimizer)
        with pytest.raises(ltc_jax.CheckpointError) as error:
            load_train_state(tmp_path, asked)
        message = str(error.value)
        assert f"holds {2 * parameters + 1} arrays, of shapes ()" in message
        assert f"the optimiser given makes {given}" in message
        assert "Resume with the optimiser the run was started with" in message
    state, _, _ = load_train_state(tmp_path, TrainState.create(model, optax.adam(1)))
    assert eqx.tree_equal(state.opt_state, saved.opt_state)


def test_checkpoint_saved_before_the_options_names_the_array(tmp_path):
    """A checkpoint without recorded options (written by an earlier version)
    still fails with a `CheckpointError`, naming the array that differs."""
    folder = _saved(tmp_path, ltc_jax.CfC(2, 8, 2, backbone_units=4, key=jr.PRNGKey(0)))
    meta_path = os.path.join(folder, "meta.json")
    with open(meta_path) as file:
        meta = json.load(file)
    del meta["models"], meta["leaves"]
    with open(meta_path, "w") as file:
        json.dump(meta, file)
    asked = ltc_jax.CfC(2, 16, 2, backbone_units=4, key=jr.PRNGKey(0))
    with pytest.raises(ltc_jax.CheckpointError, match=r"\(4, 18\) in `like`"):
        load_checkpoint(folder, asked)


def test_a_checkpoint_of_another_optimiser_names_the_state_that_differs(tmp_path):
    """The same model with another optimiser's state: the first leaf whose
    shape differs is named by its path on disk and asked for, before any array
    is read; the model alone, a prefix of the tree saved, still loads."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    parameters = eqx.filter(model, eqx.is_inexact_array)
    adam = optax.adam(1e-2).init(parameters)
    folder = save_checkpoint(tmp_path, 1, (model, adam), dict(epoch=1))
    momentum = optax.sgd(1e-2, momentum=0.9).init(parameters)
    with pytest.raises(ltc_jax.CheckpointError) as error:
        load_checkpoint(folder, (model, momentum))
    message = str(error.value)
    assert "[1][0].count is () int32 on disk, where [1][0].trace" in message, message
    assert "the same model and optimiser" in message
    restored, _ = load_checkpoint(folder, model)
    assert ltc_jax.training.parameter_digest(restored) == (
        ltc_jax.training.parameter_digest(model)
    )
    with pytest.raises(ltc_jax.CheckpointError, match="the tree asked for has more"):
        load_checkpoint(folder, (model, adam, model))


def test_a_number_leaf_loads_into_a_number_of_another_type(tmp_path):
    """A Python number is a number on disk, whatever its type: an EWC strength
    saved as 10.0 loads where 25 was built (as Equinox converts it)."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    folder = save_checkpoint(tmp_path, 1, (model, 10.0), dict(epoch=1))
    (_, strength), _ = load_checkpoint(folder, (model, 25))
    assert strength == 10


def test_a_run_whose_configuration_builds_another_model_is_named(tmp_path):
    """`ltc-jax evaluate` and `predict` read a run back with `load_run`: a
    model that its saved settings no longer build (here, other readout times)
    is named as the checkpoints' are."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.runs import load_run, save_model
    from ltc_jax.app.settings import make_model
    from ltc_jax.datasets import read_ts

    train = read_ts(toy_ts_file(tmp_path / "train.ts", 4, 0))
    config = TrainConfig(hidden_size=4, epochs=1, x64=True)
    settings = dict(tau_init=(0.5, 2.0), readout_times=2)
    model = make_model(config, 2, 2, settings)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    statistics = (np.zeros(2), np.ones(2))
    save_model(str(run_dir), model, train, statistics, settings)
    _, loaded, _ = load_run(str(run_dir))
    assert max_relative_error(loaded, model) == 0.0
    data = json.loads((run_dir / "data.json").read_text())
    data["settings"]["readout_times"] = 3
    (run_dir / "data.json").write_text(json.dumps(data))
    with pytest.raises(ltc_jax.CheckpointError, match="readout_times 2 on disk, 3"):
        load_run(str(run_dir))


def _interrupted_save(directory, step):
    """What a save killed before its rename leaves: a `.tmp` folder holding a
    partial state file. **Returns:** its path."""
    folder = os.path.join(directory, f"step-{step:08d}.tmp")
    os.makedirs(folder)
    with open(os.path.join(folder, "state.eqx"), "wb") as file:
        file.write(b"\x93NUMPY partial")
    return folder


def test_stale_tmp_folders_are_removed_at_the_next_save_and_at_resume(tmp_path):
    optimizer = optax.adam(1e-3)
    first = TrainState.create(ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0)), optimizer)
    good = save_train_state(tmp_path, first.replace(step=1), seed=0)
    stale = [_interrupted_save(tmp_path, 2), _interrupted_save(tmp_path, 7)]
    second = first.replace(model=ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(1)), step=3)
    newest = save_train_state(tmp_path, second, seed=0)
    assert not any(os.path.exists(folder) for folder in stale)
    assert sorted(os.listdir(tmp_path)) == sorted(map(os.path.basename, [good, newest]))
    stale = _interrupted_save(tmp_path, 4)
    state, meta, skipped = load_train_state(tmp_path, first)
    assert not os.path.exists(stale) and not skipped
    assert meta["step"] == 3 and state.step == 3
    assert max_relative_error(state.model, second.model) == 0.0
    assert sorted(os.listdir(tmp_path)) == sorted(map(os.path.basename, [good, newest]))
