"""Every notebook runs top to bottom at a tiny size, so none rots."""

import pathlib

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
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
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
