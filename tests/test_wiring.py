"""Wirings: their structure, polarities and bad arguments."""

import jax.random as jr
import numpy as np
import pytest

import ltc_jax


def test_wiring_structure():
    fc = ltc_jax.wirings.fully_connected(5, 2, 3)
    assert fc.synapse_count == 25 and fc.sensory_synapse_count == 15
    rnd = ltc_jax.wirings.random_wiring(10, 2, 4, sparsity=0.7)
    assert rnd.synapse_count == 30 and rnd.sensory_synapse_count == 12
    w = ltc_jax.wirings.ncp(
        8,
        5,
        3,
        4,
        sensory_fanout=3,
        inter_fanout=2,
        recurrent_command_synapses=4,
        motor_fanin=2,
    )
    motor, command, inter = range(0, 3), range(3, 8), range(8, 16)
    a = w.adjacency != 0
    # Only sensory->inter, inter->command, command->command, command->motor.
    assert not w.sensory_adjacency[:, :8].any()
    assert not a[np.ix_(inter, inter)].any() and not a[np.ix_(inter, motor)].any()
    assert not a[np.ix_(command, inter)].any() and not a[np.ix_(motor, range(16))].any()
    assert all(np.count_nonzero(w.sensory_adjacency[:, i]) >= 1 for i in inter)
    assert all(np.count_nonzero(a[np.ix_(command, [m])]) >= 2 for m in motor)
    assert all(a[np.ix_([c], motor)].any() for c in command)
    assert all(np.count_nonzero(w.sensory_adjacency[s]) == 3 for s in range(4))
    auto = ltc_jax.wirings.auto_ncp(16, 4, 3)
    assert auto.hidden_size == 16 and auto.output_size == 4 and auto.kind == "ncp"
    graph = auto.to_networkx()
    assert graph.number_of_edges() == auto.synapse_count + auto.sensory_synapse_count
    assert graph.number_of_nodes() == 16 + 3


def test_fully_connected_and_random_polarities_and_counts():
    fc = ltc_jax.wirings.fully_connected(30, 3, 4, self_connections=False)
    assert np.all(np.diag(fc.adjacency) == 0)
    assert fc.synapse_count == 30 * 29 and fc.sensory_synapse_count == 4 * 30
    assert set(np.unique(fc.adjacency)) == {-1, 0, 1}
    assert fc.layers.tolist() == [3] * 3 + [1] * 27  # motor neurons first
    again = ltc_jax.wirings.fully_connected(30, 3, 4, self_connections=False)
    np.testing.assert_array_equal(again.adjacency, fc.adjacency)  # seeded


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ltc_jax.wirings.make_wiring("star", 8, 2, 3), "Unknown wiring"),
        (lambda: ltc_jax.wirings.auto_ncp(5, 3, 2), "at least 2 neurons"),
        (lambda: ltc_jax.wirings.random_wiring(5, 2, 2, sparsity=1.0), "sparsity"),
        (
            lambda: ltc_jax.wirings.ncp(
                2,
                2,
                1,
                3,
                sensory_fanout=3,
                inter_fanout=1,
                recurrent_command_synapses=1,
                motor_fanin=1,
            ),
            "sensory_fanout",
        ),
        (lambda: ltc_jax.wirings.fully_connected(4, 5, 2), "output_size"),
        (lambda: ltc_jax.wirings.fully_connected(0, 1, 2), "must be positive"),
        (
            lambda: ltc_jax.LTC(
                2,
                6,
                2,
                cell="biophysical",
                wiring=ltc_jax.wirings.fully_connected(5, 2, 2),
                key=jr.PRNGKey(0),
            ),
            "the model needs 6",
        ),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
