"""The software and hardware a measurement ran on."""

import os
import platform
from typing import Any

import equinox as eqx
import jax


def environment() -> dict[str, Any]:
    """Versions, backend and device: the `environment` block of every metrics file.

    **Returns:** a JSON-serialisable dict: `ltc_jax`, `jax`, `jaxlib`, `equinox`,
    `diffrax`, `optax` and `python` versions, `platform`, `backend` (`"cpu"`,
    `"gpu"`, ...), `device` (the first device's kind), `device_count`,
    `process_count`, `cpu_count` and `x64` (whether float64 is on).
    """
    import diffrax
    import jaxlib
    import optax

    from .. import __version__

    device = jax.devices()[0]
    return dict(
        ltc_jax=__version__,
        jax=jax.__version__,
        jaxlib=jaxlib.__version__,
        equinox=eqx.__version__,
        diffrax=diffrax.__version__,
        optax=optax.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        backend=jax.default_backend(),
        device=device.device_kind,
        device_count=jax.device_count(),
        process_count=jax.process_count(),
        cpu_count=os.cpu_count(),
        x64=bool(jax.config.read("jax_enable_x64")),
    )
