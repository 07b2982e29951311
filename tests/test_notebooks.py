"""Every notebook runs top to bottom at a tiny size, so none rots."""

import pathlib
import re
import shlex
import subprocess
import sys
import tomllib

import nbclient
import nbformat
import pytest


NOTEBOOKS = pathlib.Path(__file__).parent.parent / "notebooks"

# Overrides for each notebook's parameters cell (papermill-style: a cell tagged
# "parameters"; the overrides go into a cell right after it).
TINY = {
    "01_quickstart.ipynb": dict(hidden_size=4, epochs=1, batch_size=16, train_size=32),
    "02_adjoint_vs_checkpoint.ipynb": dict(
        lengths=(10, 30), batch_size=2, hidden_size=4, timed_steps=1
    ),
    "03_solvers_and_tolerances.ipynb": dict(
        hidden_size=4,
        batch_size=2,
        tolerances=(1e-2, 1e-4),
        fixed_steps=(0.5, 0.25),
        stiff_tau=0.1,
    ),
    "04_long_ecg.ipynb": dict(
        window_seconds=0.1,
        train_windows=8,
        test_windows=4,
        hidden_size=4,
        batch_size=4,
        epochs=1,
        estimate_seconds=(0.1, 1),
    ),
    "05_sensor_streams.ipynb": dict(
        train_machines=3,
        test_machines=2,
        sensors=10,
        simulated_seconds=900.0,
        window_seconds=120.0,
        stride_seconds=120.0,
        horizon_seconds=300.0,
        hidden_size=4,
        epochs=1,
    ),
}


def execute(name: str, overrides: dict, workdir: pathlib.Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    tagged = [
        i
        for i, cell in enumerate(notebook.cells)
        if "parameters" in cell.metadata.get("tags", [])
    ]
    assert len(tagged) == 1, f"{name} needs exactly one cell tagged 'parameters'"
    lines = [f"{key} = {value!r}" for key, value in overrides.items()]
    notebook.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell("\n".join(lines)))
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,  # per cell; pytest's own limit (900 s) is per test
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        # Stop the kernel at once when the last cell is done: jupyter_client's
        # graceful shutdown (request, then wait) has failed inside its own event
        # loop handling (asyncio.InvalidStateError) on a loaded machine.
        shutdown_kernel="immediate",
    )
    client.execute()
    return notebook


def test_every_notebook_is_covered():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(TINY)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY))
def test_notebook_runs(name, tmp_path):
    notebook = execute(name, TINY[name], tmp_path)
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    images = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert images, f"{name} drew no figure"
    text = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    for pattern in PRINTED.get(name, ()):
        assert re.search(pattern, text), f"{name} printed nothing like {pattern!r}"


# What a notebook must print, beyond running without error.
PRINTED = {
    # One runtime peak per mode, each measured in its own process: a figure,
    # named by its source (a CPU's high-water mark, or a GPU's allocator).
    "02_adjoint_vs_checkpoint.ipynb": [
        rf"{mode}\s+runtime peak [\d.]+ MiB "
        r"\((process high-water mark|device allocator)"
        for mode in ("full", "checkpoint", "backsolve", "direct")
    ],
}


ROOT = NOTEBOOKS.parent
SOURCE = re.compile(r"^LTC_JAX_SOURCE = (.+)$", re.MULTILINE)


def _install_cell(name: str) -> str:
    """The source of a notebook's install cell: its first code cell."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    return next(c.source for c in notebook.cells if c.cell_type == "code")


def test_install_cells_take_their_source_from_one_variable():
    """Every notebook's install cell is the same, sets LTC_JAX_SOURCE once (None:
    the wheel or archive uploaded to the session), and installs from it."""
    cells = {name: _install_cell(name) for name in TINY}
    first = cells[sorted(TINY)[0]]
    assert all(cell == first for cell in cells.values())
    assert SOURCE.findall(first) == ["None"]
    assert "@ {LTC_JAX_SOURCE}" in first


@pytest.mark.slow
def test_colab_install_cell_installs_the_uploaded_wheel_into_a_fresh_environment(
    tmp_path,
):
    """Build the wheel as the docs say, put it where Colab's uploads go (the
    working folder), and run the install cell there as Colab would (a
    `google.colab` module, no GPU), its `%pip` line printed instead of run; then
    install what it printed into a fresh virtual environment, import the package
    and load its bundled data there."""
    wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run([*wheel, "-w", str(tmp_path), str(ROOT)], check=True, timeout=600)
    cell = _install_cell(sorted(TINY)[0])
    (line,) = [row for row in cell.splitlines() if "%pip install" in row]
    indent = line[: len(line) - len(line.lstrip())]
    arguments = line.split("%pip install", 1)[1].strip()
    script = cell.replace(line, f"{indent}print(f{arguments!r})")
    colab = "import sys, types; sys.modules['google.colab'] = types.ModuleType('c')\n"
    printed = subprocess.run(
        [sys.executable, "-c", colab + script],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    (requirement,) = shlex.split(printed)[1:]  # after --quiet
    assert requirement.startswith("ltc_jax[experiments] @ file://")
    assert requirement.endswith(".whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "--quiet", requirement]
    subprocess.run(install, check=True, cwd=tmp_path, timeout=1200)
    check = (
        "import ltc_jax, matplotlib; "
        "train, test = ltc_jax.datasets.load_japanese_vowels(); "
        "print(ltc_jax.__version__, len(train), len(test))"
    )
    out = subprocess.run(
        [python, "-c", check], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.stdout.split() == [ltc_jax_version(), "270", "370"]


def ltc_jax_version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["version"]
