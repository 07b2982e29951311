"""Sparse wirings of the biophysical LTC: which neurons synapse onto which, and
with which polarity. Plain integer arrays, never trained.

Neuron numbering follows the original authors' `ncps` package (Lechner et al.
2020): motor (output) neurons first, `0 .. output_size - 1`; for NCP then command,
then inter neurons. Sensory neurons are the input channels.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class Wiring:
    """Synapses of a biophysical LTC network.

    **Fields:**

    - `adjacency`: `int8[hidden_size, hidden_size]`; `adjacency[i, j]` is the
        polarity of the synapse from neuron `i` onto neuron `j`: `+1` excitatory
        (reversal potential +1), `-1` inhibitory (-1), `0` no synapse.
    - `sensory_adjacency`: `int8[input_size, hidden_size]`, the same from each input
        channel (sensory neuron) onto each neuron.
    - `output_size`: the motor neurons, `0 .. output_size - 1`, read out as outputs.
    - `layers`: `int8[hidden_size]`, a layer label per neuron for drawing
        (0 sensory is implicit; 1 inter, 2 command, 3 motor; fully connected and
        random wirings label every non-motor neuron 1).
    - `kind`: `"fully_connected"`, `"random"` or `"ncp"`.
    """

    adjacency: np.ndarray
    sensory_adjacency: np.ndarray
    output_size: int
    layers: np.ndarray
    kind: str

    def __post_init__(self):
        hidden_size = self.adjacency.shape[0]
        if self.adjacency.shape != (hidden_size, hidden_size):
            raise ValueError(f"adjacency must be square; got {self.adjacency.shape}.")
        if (
            self.sensory_adjacency.ndim != 2
            or self.sensory_adjacency.shape[1] != hidden_size
        ):
            raise ValueError(
                f"sensory_adjacency must be (input_size, {hidden_size}); got "
                f"{self.sensory_adjacency.shape}."
            )
        if not 1 <= self.output_size <= hidden_size:
            raise ValueError(
                f"output_size must lie in [1, {hidden_size}]; got {self.output_size}."
            )
        for name in ("adjacency", "sensory_adjacency"):
            values = set(np.unique(getattr(self, name)).tolist())
            if not values <= {-1, 0, 1}:
                raise ValueError(f"{name} holds values other than -1, 0, 1: {values}.")

    @property
    def hidden_size(self) -> int:
        """Neurons of the network (its units)."""
        return self.adjacency.shape[0]

    @property
    def input_size(self) -> int:
        """Input channels (sensory neurons)."""
        return self.sensory_adjacency.shape[0]

    @property
    def synapse_count(self) -> int:
        """Recurrent synapses."""
        return int(np.count_nonzero(self.adjacency))

    @property
    def sensory_synapse_count(self) -> int:
        """Synapses from the inputs."""
        return int(np.count_nonzero(self.sensory_adjacency))

    def to_networkx(self):
        """The wiring as a `networkx.DiGraph`, to draw or analyse with networkx.

        Nodes are `"s0", "s1", ...` (sensory) and `0, 1, ...` (neurons), each with a
        `layer` attribute (0 sensory, 1 inter, 2 command, 3 motor); edges carry
        `polarity`. Draw it, for example, with
        `networkx.draw_networkx(graph, networkx.multipartite_layout(graph,
        subset_key="layer"))`.

        **Raises:** `ImportError` if networkx is not installed (`pip install
        networkx`, included in the `experiments` extra).
        """
        import networkx as nx

        graph = nx.DiGraph()
        for channel in range(self.input_size):
            graph.add_node(f"s{channel}", layer=0)
        for neuron in range(self.hidden_size):
            graph.add_node(neuron, layer=int(self.layers[neuron]))
        for src, dest in zip(*np.nonzero(self.sensory_adjacency), strict=True):
            polarity = int(self.sensory_adjacency[src, dest])
            graph.add_edge(f"s{src}", int(dest), polarity=polarity)
        for src, dest in zip(*np.nonzero(self.adjacency), strict=True):
            graph.add_edge(int(src), int(dest), polarity=int(self.adjacency[src, dest]))
        return graph


def _polarities(rng: np.random.Generator, shape) -> np.ndarray:
    # As the original authors: two thirds excitatory.
    return rng.choice(np.array([-1, 1, 1], dtype=np.int8), size=shape)


def _motor_layers(hidden_size: int, output_size: int) -> np.ndarray:
    layers = np.ones(hidden_size, dtype=np.int8)
    layers[:output_size] = 3
    return layers


def fully_connected(
    hidden_size: int,
    output_size: int,
    input_size: int,
    *,
    self_connections: bool = True,
    seed: int = 1111,
) -> Wiring:
    """Every neuron synapses onto every neuron (and every input onto every neuron),
    with random polarity (two thirds excitatory), as `ncps.wirings.FullyConnected`.

    **Raises:** `ValueError` for non-positive sizes or `output_size > hidden_size`.
    """
    _check_sizes(hidden_size, output_size, input_size)
    rng = np.random.default_rng(seed)
    adjacency = _polarities(rng, (hidden_size, hidden_size))
    if not self_connections:
        np.fill_diagonal(adjacency, 0)
    return Wiring(
        adjacency=adjacency,
        sensory_adjacency=_polarities(rng, (input_size, hidden_size)),
        output_size=output_size,
        layers=_motor_layers(hidden_size, output_size),
        kind="fully_connected",
    )


def random_wiring(
    hidden_size: int,
    output_size: int,
    input_size: int,
    *,
    sparsity: float = 0.5,
    seed: int = 1111,
) -> Wiring:
    """A random fraction `1 - sparsity` of all possible synapses (recurrent and
    sensory, each rounded to the nearest count), random polarity, as
    `ncps.wirings.Random`.

    **Raises:** `ValueError` for non-positive sizes, `output_size > hidden_size`, or
    `sparsity` outside `[0, 1)`.
    """
    _check_sizes(hidden_size, output_size, input_size)
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must lie in [0, 1); got {sparsity}.")
    rng = np.random.default_rng(seed)

    def sparse(shape):
        count = int(round(shape[0] * shape[1] * (1.0 - sparsity)))
        flat = np.zeros(shape[0] * shape[1], dtype=np.int8)
        chosen = rng.choice(flat.size, size=count, replace=False)
        flat[chosen] = _polarities(rng, count)
        return flat.reshape(shape)

    return Wiring(
        adjacency=sparse((hidden_size, hidden_size)),
        sensory_adjacency=sparse((input_size, hidden_size)),
        output_size=output_size,
        layers=_motor_layers(hidden_size, output_size),
        kind="random",
    )


def ncp(
    inter_neurons: int,
    command_neurons: int,
    motor_neurons: int,
    input_size: int,
    *,
    sensory_fanout: int,
    inter_fanout: int,
    recurrent_command_synapses: int,
    motor_fanin: int,
    seed: int = 22222,
) -> Wiring:
    """A neural circuit policy (Lechner et al. 2020): sensory -> inter -> command ->
    motor layers.

    Each sensory neuron synapses onto `sensory_fanout` random inter neurons and each
    inter neuron onto `inter_fanout` random command neurons; inter (command) neurons
    left without input get synapses from about the mean fan-in of their layer;
    `recurrent_command_synapses` random synapses join command neurons; each motor
    neuron receives `motor_fanin` random command neurons, and command neurons left
    without output get about the mean fan-out. Polarities are +-1 with equal
    probability. The construction follows `ncps.wirings.NCP`; it is not
    bit-identical to it (a different random generator).

    **Raises:** `ValueError` if a layer is empty or a fan-out/fan-in exceeds the
    size of the layer it reaches.
    """
    for name, value in dict(
        inter_neurons=inter_neurons,
        command_neurons=command_neurons,
        motor_neurons=motor_neurons,
        input_size=input_size,
    ).items():
        if value < 1:
            raise ValueError(f"{name} must be positive; got {value}.")
    for name, value, limit in (
        ("sensory_fanout", sensory_fanout, inter_neurons),
        ("inter_fanout", inter_fanout, command_neurons),
        ("motor_fanin", motor_fanin, command_neurons),
    ):
        if not 1 <= value <= limit:
            raise ValueError(f"{name} must lie in [1, {limit}]; got {value}.")
    rng = np.random.default_rng(seed)
    hidden_size = inter_neurons + command_neurons + motor_neurons
    motor = np.arange(motor_neurons)
    command = np.arange(motor_neurons, motor_neurons + command_neurons)
    inter = np.arange(motor_neurons + command_neurons, hidden_size)
    sensory = np.arange(input_size)
    adjacency = np.zeros((hidden_size, hidden_size), dtype=np.int8)
    sensory_adjacency = np.zeros((input_size, hidden_size), dtype=np.int8)

    def sign():
        return rng.choice(np.array([-1, 1], dtype=np.int8))

    def connect_forward(matrix, sources, targets, fanout):
        """Each source onto `fanout` targets; unreached targets get mean fan-in."""
        reached = set()
        for src in sources:
            for dest in rng.choice(targets, size=fanout, replace=False):
                matrix[src, dest] = sign()
                reached.add(int(dest))
        fanin = int(np.clip(len(sources) * fanout // len(targets), 1, len(sources)))
        for dest in targets:
            if int(dest) not in reached:
                for src in rng.choice(sources, size=fanin, replace=False):
                    matrix[src, dest] = sign()

    connect_forward(sensory_adjacency, sensory, inter, sensory_fanout)
    connect_forward(adjacency, inter, command, inter_fanout)
    for _ in range(recurrent_command_synapses):
        adjacency[rng.choice(command), rng.choice(command)] = sign()
    # Command -> motor is built from the motor side: each motor neuron has a fan-in.
    sending = set()
    for dest in motor:
        for src in rng.choice(command, size=motor_fanin, replace=False):
            adjacency[src, dest] = sign()
            sending.add(int(src))
    fanout = int(
        np.clip(motor_neurons * motor_fanin // command_neurons, 1, motor_neurons)
    )
    for src in command:
        if int(src) not in sending:
            for dest in rng.choice(motor, size=fanout, replace=False):
                adjacency[src, dest] = sign()

    layers = np.empty(hidden_size, dtype=np.int8)
    layers[motor], layers[command], layers[inter] = 3, 2, 1
    return Wiring(
        adjacency=adjacency,
        sensory_adjacency=sensory_adjacency,
        output_size=motor_neurons,
        layers=layers,
        kind="ncp",
    )


def auto_ncp(
    hidden_size: int,
    output_size: int,
    input_size: int,
    *,
    sparsity: float = 0.5,
    seed: int = 22222,
) -> Wiring:
    """An NCP sized from `(hidden_size, output_size)` alone, as `ncps.wirings.AutoNCP`:
    `output_size` motor neurons, 40% of the rest command neurons (at least one),
    the remainder inter neurons; fan-outs and fan-ins are `1 - sparsity` of the
    layer they reach (at least one), with `2 * (1 - sparsity) * command_neurons`
    recurrent command synapses.

    **Raises:** `ValueError` if `output_size >= hidden_size - 2` or `sparsity` is
    outside `[0.1, 1)`.
    """
    if output_size >= hidden_size - 2:
        raise ValueError(
            f"An NCP needs at least 2 neurons besides the {output_size} motor neurons; "
            f"got hidden_size={hidden_size}."
        )
    if not 0.1 <= sparsity < 1.0:
        raise ValueError(f"sparsity must lie in [0.1, 1); got {sparsity}.")
    density = 1.0 - sparsity
    rest = hidden_size - output_size
    command = max(int(0.4 * rest), 1)
    inter = rest - command
    return ncp(
        inter,
        command,
        output_size,
        input_size,
        sensory_fanout=max(int(inter * density), 1),
        inter_fanout=max(int(command * density), 1),
        recurrent_command_synapses=max(int(command * density * 2), 1),
        motor_fanin=max(int(command * density), 1),
        seed=seed,
    )


def make_wiring(
    kind: str,
    hidden_size: int,
    output_size: int,
    input_size: int,
    *,
    seed: int | None = None,
    sparsity: float = 0.5,
) -> Wiring:
    """A wiring by name: `"fc"` ([`ltc_jax.wirings.fully_connected`][]), `"random"`
    ([`ltc_jax.wirings.random_wiring`][]) or `"ncp"` ([`ltc_jax.wirings.auto_ncp`][]),
    from `(hidden_size, output_size)` and the number of input channels.

    **Raises:** `ValueError` for an unknown kind, or as the builders.
    """
    extra = {} if seed is None else dict(seed=seed)
    if kind == "fc":
        return fully_connected(hidden_size, output_size, input_size, **extra)
    if kind == "random":
        return random_wiring(
            hidden_size, output_size, input_size, sparsity=sparsity, **extra
        )
    if kind == "ncp":
        return auto_ncp(
            hidden_size, output_size, input_size, sparsity=sparsity, **extra
        )
    raise ValueError(f"Unknown wiring {kind!r}; choose 'fc', 'random' or 'ncp'.")


def _check_sizes(hidden_size: int, output_size: int, input_size: int) -> None:
    if hidden_size < 1 or input_size < 1:
        raise ValueError(
            "hidden_size and input_size must be positive; got "
            f"{hidden_size} and {input_size}."
        )
    if not 1 <= output_size <= hidden_size:
        raise ValueError(
            f"output_size must lie in [1, {hidden_size}]; got {output_size}."
        )
