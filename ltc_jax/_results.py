"""The result codes of a solve: diffrax's, and those of ltc_jax's own checks."""

import diffrax


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """The result of a solve, as [`ltc_jax.Trajectory`][]`.result` reports it:
    every member of `diffrax.RESULTS` (`successful`, `max_steps_reached`,
    `dt_min_reached`, ...) and two of ltc_jax's checks
    (see [`ltc_jax.Integrator`][]'s `check_state`). Public as
    `ltc_jax.RESULTS`.

    - `non_finite_input`: the vector field's parameters or `y0` held NaN or
        infinity, so the solve could not succeed.
    - `diverged`: a saved state left the bound the exact solution keeps
        (Hasani et al. 2021, Theorem 2): with fixed explicit steps, a step
        outside the solver's stability region, which can stay finite.

    An `equinox.Enumeration` extending diffrax's, as diffrax extends
    optimistix's: compare with `==` (`trajectory.result ==
    ltc_jax.RESULTS.diverged`), read the message with `ltc_jax.RESULTS[result]`,
    and bring a `diffrax.RESULTS` into it with `ltc_jax.RESULTS.promote`. With
    `throw=True` a solve raises the message of its result, as diffrax does.
    """

    successful = ""
    non_finite_input = (
        "The vector field's parameters or the initial state y0 hold NaN or "
        "infinity, so no solve can succeed (in training: a diverged update; lower "
        "the learning rate, clip the gradients, or check the data)."
    )
    diverged = (
        "The solve diverged: its state left the bound the exact solution keeps "
        "(Hasani et al. 2021, Theorem 2: each unit between min(0, A) and max(0, A); "
        "for the biophysical cell, between its reversal potentials). With fixed "
        "explicit steps this is a step outside the solver's stability region: "
        "lower dt0, raise tau_min, or take adaptive steps."
    )
