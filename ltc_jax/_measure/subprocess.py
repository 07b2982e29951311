"""Call a function in a fresh Python process and return its JSON result.

A process's memory high-water mark, JAX's compilation caches and the device's peak
counter all accumulate over a process's life; measuring one configuration per
process is the only way to read them for that configuration alone.
"""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from .._errors import SubprocessError


def call_in_subprocess(
    target: str,
    kwargs: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Any:
    """Run `function(**kwargs)` in a fresh Python process and return its result.

    The child is `sys.executable` with this process's import path (`sys.path`), so
    it imports what this process can. It starts with no JAX state of its own: no
    compiled programs, no device memory in use, a fresh process high-water mark.
    Set JAX options through `env`, e.g. `{"JAX_ENABLE_X64": "1"}` for float64.

    **Arguments:**

    - `target`: `"package.module:function"`, or `"path/to/file.py:function"` for a
        script that is not importable as a module (such as an experiment).
    - `kwargs`: keyword arguments, JSON-serialisable (default none).
    - `env`: variables added to this process's environment for the child.
    - `timeout`: seconds before the child is killed (default: no limit).

    **Returns:** the function's return value, which must be JSON-serialisable,
    after a round trip through JSON (tuples come back as lists).

    **Raises:**

    - `ValueError` if `target` is not `"module:function"` or `kwargs` is not
        JSON-serialisable.
    - [`ltc_jax.SubprocessError`][] if the function raises or the process dies
        (the message holds the end of its error output), or it runs past
        `timeout`.
    """
    module, sep, function = target.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise ValueError(
            f"target must look like 'package.module:function' or "
            f"'path/to/file.py:function'; got {target!r}."
        )
    try:
        arguments = json.dumps(dict(kwargs or {}))
    except TypeError as error:
        raise ValueError(f"kwargs must be JSON-serialisable: {error}") from error
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with tempfile.TemporaryDirectory() as folder:
        result_file = os.path.join(folder, "result.json")
        request = json.dumps(
            dict(target=target, kwargs=arguments, result_file=result_file)
        )
        try:
            process = subprocess.run(
                [sys.executable, "-m", "ltc_jax._measure.subprocess"],
                input=request,
                capture_output=True,
                text=True,
                env=child_env,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as error:
            raise SubprocessError(
                f"{target} ran past its timeout of {timeout} s.\n" + _tail(error.stderr)
            ) from error
        if process.returncode != 0:
            raise SubprocessError(
                f"{target} failed in its subprocess (exit code "
                f"{process.returncode}).\n" + _tail(process.stderr)
            )
        with open(result_file) as file:
            return json.load(file)


def _tail(text: str | bytes | None, lines: int = 30) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _load(target: str):
    module_name, _, function = target.rpartition(":")
    if module_name.endswith(".py"):
        name = os.path.splitext(os.path.basename(module_name))[0]
        spec = importlib.util.spec_from_file_location(name, module_name)
        if spec is None or spec.loader is None:
            raise ImportError(f"Cannot load {module_name}.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return getattr(module, function)


def _main() -> None:
    request = json.loads(sys.stdin.read())
    function = _load(request["target"])
    result = function(**json.loads(request["kwargs"]))
    with open(request["result_file"], "w") as file:
        json.dump(result, file)


if __name__ == "__main__":
    _main()
