"""Data parallelism: `fit` over a mesh of 4 CPU devices, and over two processes
joined by `jax.distributed` on the loopback interface, against one device.

Each run is a fresh Python process (the device count and the distributed
runtime are fixed when JAX starts); each prints its parameters after one epoch
as JSON."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest


SCRIPT = """
import json, sys
import jax
role, port = sys.argv[1], sys.argv[2]
if role == "devices":
    jax.config.update("jax_num_cpu_devices", 4)
elif role != "alone":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2,
        process_id=int(role),
    )
import equinox as eqx, numpy as np, optax
import ltc_jax
from ltc_jax.datasets import SequenceDataset

rng = np.random.default_rng(0)
n, times = 24, 12
lengths = rng.integers(6, times + 1, n).astype(np.int32)
ts = np.cumsum(rng.uniform(0.5, 1.5, (n, times)), axis=1)
xs = rng.normal(size=(n, times, 3))
pad = np.arange(times)[None] >= lengths[:, None]
ts[pad] = np.nan
xs[pad] = np.nan
data = SequenceDataset(
    ts=ts, xs=xs, lengths=lengths,
    labels=rng.integers(0, 2, n).astype(np.int32), class_names=("a", "b"),
)
model = ltc_jax.LTC(3, 8, 2, readout_times=3, key=jax.random.PRNGKey(0))
integrator = ltc_jax.make_integrator("tsit5", rtol=1e-4, atol=1e-6, max_steps=512)
mesh = None if role == "alone" else ltc_jax.training.data_mesh()
placement = (
    ltc_jax.training.SingleDevice() if mesh is None
    else ltc_jax.training.DataParallel(mesh)
)
out = {"devices": placement.device_count}
if mesh is not None:
    batch = next(ltc_jax.batches(data, 8))
    placed = ltc_jax.training.shard_batch(batch, mesh, 8)
    out["split"] = [
        str(placed.path.ts.sharding.spec), str(placed.labels.sharding.spec)
    ]
if mesh is not None:
    try:
        ltc_jax.fit(model, data, integrator=integrator, optimizer=optax.sgd(0.1),
                    epochs=1, batch_size=6 if mesh.size == 4 else 7,
                    placement=placement)
    except ValueError as error:
        out["error"] = str(error)
trained, history = ltc_jax.fit(
    model, data, integrator=integrator, optimizer=optax.adam(1e-2), epochs=1,
    batch_size=8, placement=placement, validation=data,
    progress=ltc_jax.training.NoFitProgress(),
)
leaves = jax.tree.leaves(eqx.filter(trained, eqx.is_inexact_array))
out["params"] = np.concatenate([np.ravel(x) for x in leaves]).tolist()
out["loss"] = history[0]["loss"]
out["validation_loss"] = history[0]["validation_loss"]
print(json.dumps(out))
"""


def _spawn(args: list[str], devices: int | None = None) -> subprocess.Popen:
    """`python ARGS` on CPU, its output captured; with `devices`, that many CPU
    devices (`XLA_FLAGS`), else as the script sets them."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONWARNINGS="ignore")
    env.pop("XLA_FLAGS", None)
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finished(process: subprocess.Popen) -> str:
    """Its output, once it has succeeded."""
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    return stdout


def _start(role: str, port: int = 0) -> subprocess.Popen:
    return _spawn(["-c", SCRIPT, role, str(port)])


def _result(process: subprocess.Popen) -> dict:
    return json.loads(_finished(process).strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


def _relative(a: dict, b: dict) -> float:
    x, y = np.asarray(a["params"]), np.asarray(b["params"])
    return float(np.max(np.abs(x - y)) / np.max(np.abs(y)))


@pytest.fixture(scope="module")
def alone():
    return _result(_start("alone"))


def test_fit_over_four_devices_equals_one_device(alone):
    """One epoch of 3 batches of 8 ragged, irregular sequences split 2 per
    device: the parameters equal one device's to float32 round-off, as do the
    global training and validation losses; a batch of 6 does not divide."""
    four = _result(_start("devices"))
    assert four["devices"] == 4
    assert _relative(four, alone) < 1e-5
    assert four["loss"] == pytest.approx(alone["loss"], rel=1e-5)
    assert four["validation_loss"] == pytest.approx(alone["validation_loss"], rel=1e-5)
    assert "batch_size=6 does not divide over the mesh's 4 devices" in four["error"]
    assert four["split"] == ["P('data',)"] * 2  # really split


def test_two_processes_on_loopback_train_as_one(alone):
    """`jax.distributed` with two CPU processes of one device each, joined on
    127.0.0.1: both end with the parameters of a single-process run on the
    same global batches, to float32 round-off."""
    port = _free_port()
    processes = [_start(str(i), port) for i in range(2)]
    results = [_result(process) for process in processes]
    for result in results:
        assert result["devices"] == 2
        assert _relative(result, alone) < 1e-5
        assert result["loss"] == pytest.approx(alone["loss"], rel=1e-5)


def _cli(args: list[str], devices: int = 1) -> subprocess.Popen:
    return _spawn(["-m", "ltc_jax", "train", "--no-progress", *args], devices)


def test_the_main_job_on_two_devices_and_on_two_processes(tmp_path):
    """`ltc-jax train --devices 2`, and two processes joined with
    `--coordinator`, end with one device's test loss to float32 round-off; only
    process 0 writes the run folder, and the derived batch of 8 divides."""
    from helpers import toy_ts_file

    train = toy_ts_file(tmp_path / "train.ts", 32, 0)
    test = toy_ts_file(tmp_path / "test.ts", 16, 1)
    common = ["--data", train, "--test-data", test, "--hidden-size", "4"]
    common += ["--epochs", "2"]
    _finished(_cli([*common, "--out", str(tmp_path / "one")]))
    _finished(_cli([*common, "--devices", "2", "--out", str(tmp_path / "two")], 2))
    port = _free_port()
    hosts = [
        _cli(
            [
                *common,
                "--out",
                str(tmp_path / "hosts"),
                "--coordinator",
                f"127.0.0.1:{port}",
                "--num-processes",
                "2",
                "--process-id",
                str(i),
            ]
        )
        for i in range(2)
    ]
    printed = [_finished(process) for process in hosts]
    assert all("test accuracy" in text for text in printed)

    def metrics(name):
        return json.loads((tmp_path / name / "metrics.json").read_text())

    one = metrics("one")
    for name, devices, processes in (("two", 2, 1), ("hosts", 2, 2)):
        run = metrics(name)
        assert (run["devices"], run["processes"]) == (devices, processes)
        assert run["test_loss"] == pytest.approx(one["test_loss"], rel=1e-5)
        assert run["derived"]["batch_size"]["value"] == 8
    assert sorted(os.listdir(tmp_path / "hosts")) == sorted(
        os.listdir(tmp_path / "one")
    )
