"""The MIT-BIH record 208 ECG excerpt, and forecasting windows cut from a signal."""

import dataclasses
import importlib.resources

import numpy as np

from ._dataset import SequenceDataset


MITBIH_208_SAMPLE_RATE_HZ = 360.0
"""Sampling rate of the bundled MIT-BIH record 208 excerpt, in hertz."""

_FILE = "mitbih_208_ecg.dat"
_ADC_ZERO = 1024  # raw value of 0 mV
_ADC_GAIN = 200.0  # raw units per millivolt


def load_mitbih_208() -> tuple[np.ndarray, np.ndarray]:
    """Five minutes of one ECG lead: MIT-BIH Arrhythmia Database, record 208.

    108,000 samples at 360 Hz (the record's first five minutes), from a patient
    with frequent premature ventricular contractions. The file holds the raw
    11-bit ADC values (`uint16`); they are converted as
    `millivolts = (raw - 1024) / 200`, the record's zero and gain.

    **Returns:** `(ts, millivolts)`, both `float64[108000]`: `ts[i] = i / 360` in
    seconds (so `tau`, `dt0` and every other time in `ltc_jax` is in seconds when
    you use these times), and the signal in millivolts (about -3.5 to 3.6 mV).

    Source: the copy of the excerpt shipped with SciPy up to 1.14
    (`scipy.misc.electrocardiogram`), unchanged; provenance in the package's
    `datasets/data/README.md`. Licence: ODC-By 1.0 (cite both references).

    ??? cite "References"

        ```bibtex
        @article{moody2001impact,
            title={The impact of the {MIT-BIH} Arrhythmia Database},
            author={Moody, George B. and Mark, Roger G.},
            journal={IEEE Engineering in Medicine and Biology Magazine},
            volume={20}, number={3}, pages={45--50}, year={2001}
        }
        @article{goldberger2000physiobank,
            title={{PhysioBank}, {PhysioToolkit}, and {PhysioNet}: Components of a
                   New Research Resource for Complex Physiologic Signals},
            author={Goldberger, Ary L. and Amaral, Luis A. N. and Glass, Leon and
                    Hausdorff, Jeffrey M. and Ivanov, Plamen Ch. and Mark, Roger G.
                    and Mietus, Joseph E. and Moody, George B. and Peng, Chung-Kang
                    and Stanley, H. Eugene},
            journal={Circulation},
            volume={101}, number={23}, pages={e215--e220}, year={2000}
        }
        ```
    """
    resource = importlib.resources.files("ltc_jax.datasets") / "data" / _FILE
    with resource.open("rb") as file, np.load(file) as archive:
        raw = archive["ecg"]
    millivolts = (raw.astype(np.float64) - _ADC_ZERO) / _ADC_GAIN
    ts = np.arange(raw.shape[0], dtype=np.float64) / MITBIH_208_SAMPLE_RATE_HZ
    return ts, millivolts


def forecast_windows(
    ts: np.ndarray,
    values: np.ndarray,
    *,
    window: int,
    horizon: int,
    starts: np.ndarray,
    name: str = "",
) -> SequenceDataset:
    """Windows of a sampled signal, each labelled with the value `horizon` samples
    after its end: a forecasting (regression) task.

    Window `i` covers samples `starts[i], ..., starts[i] + window - 1`; its target
    is `values[starts[i] + window - 1 + horizon]`.

    **Arguments:**

    - `ts`: `float[n]` sample times, strictly increasing.
    - `values`: `float[n]` or `float[n, channels]` samples.
    - `window`: samples per window, at least 2.
    - `horizon`: how many samples ahead of the window's last sample the target
        lies, at least 1.
    - `starts`: `int[m]` first sample of each window.
    - `name`: recorded in the dataset.

    **Returns:** a [`ltc_jax.datasets.SequenceDataset`][] with `ts` `float64[m,
    window]` (each window keeps its own absolute times), `xs` `float64[m, window,
    channels]`, `lengths` all `window`, and `labels` `float64[m, channels]`.

    **Raises:** `ValueError` if shapes disagree, `window < 2`, `horizon < 1`, or a
    window or its target falls outside the signal.
    """
    ts = np.asarray(ts, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if ts.ndim != 1 or values.ndim != 2 or values.shape[0] != ts.shape[0]:
        raise ValueError(
            f"ts must be (n,) and values (n,) or (n, channels) with the same n; got "
            f"ts {ts.shape} and values {values.shape}."
        )
    if window < 2:
        raise ValueError(f"window must be at least 2 samples; got {window}.")
    if horizon < 1:
        raise ValueError(f"horizon must be at least 1 sample; got {horizon}.")
    starts = np.asarray(starts)
    if starts.ndim != 1 or not np.issubdtype(starts.dtype, np.integer):
        raise ValueError(
            f"starts must be a 1-D integer array; got {starts.dtype} of shape "
            f"{starts.shape}."
        )
    last_needed = window - 1 + horizon
    if starts.size and (starts.min() < 0 or starts.max() + last_needed >= ts.shape[0]):
        raise ValueError(
            f"A window of {window} samples with a target {horizon} samples ahead "
            f"needs starts in [0, {ts.shape[0] - 1 - last_needed}] for a signal of "
            f"{ts.shape[0]} samples; got starts from {starts.min()} to {starts.max()}."
        )
    index = starts[:, None] + np.arange(window)
    return SequenceDataset(
        ts=ts[index],
        xs=values[index],
        lengths=np.full(starts.shape, window, dtype=np.int32),
        labels=values[starts + last_needed],
        name=name,
    )


def mitbih_208_windows(
    window: int, *, horizon: int, count: int, name: str = ""
) -> SequenceDataset:
    """`count` forecasting windows of the bundled MIT-BIH record 208 ECG (see
    [`ltc_jax.datasets.load_mitbih_208`][]), spread evenly over the recording:
    the first starts at its first sample, the last ends `horizon` samples before
    its end. Each window is labelled with the signal `horizon` samples after its
    last sample ([`ltc_jax.datasets.forecast_windows`][]).

    Times are seconds from each window's start, so every window has the same
    time grid (`i / 360` s) and stays exact in float32; the values are
    millivolts.

    **Arguments:**

    - `window`: samples per window, at least 2.
    - `horizon`: samples between a window's last sample and its target, at least
        1 (36 samples is 0.1 s).
    - `count`: number of windows, at least 1.
    - `name`: recorded in the dataset (default: a description of the windows).

    **Returns:** a [`ltc_jax.datasets.SequenceDataset`][]: `ts` `float64[count,
    window]`, `xs` `float64[count, window, 1]`, `labels` `float64[count, 1]`.

    **Raises:** `ValueError` if `count < 1`, or the windows and their targets do
    not fit in the recording's 108,000 samples (or as `forecast_windows`).
    """
    if count < 1:
        raise ValueError(f"count must be at least 1; got {count}.")
    ts, millivolts = load_mitbih_208()
    last_start = ts.shape[0] - window - horizon
    if last_start < 0:
        raise ValueError(
            f"A window of {window} samples with a target {horizon} samples ahead "
            f"does not fit in the recording's {ts.shape[0]} samples."
        )
    starts = np.linspace(0, last_start, count).astype(np.int64)
    data = forecast_windows(
        ts,
        millivolts,
        window=window,
        horizon=horizon,
        starts=starts,
        name=name
        or f"MIT-BIH 208: {count} windows of {window} samples, target +{horizon}",
    )
    grid = np.arange(window, dtype=np.float64) / MITBIH_208_SAMPLE_RATE_HZ
    return dataclasses.replace(data, ts=np.tile(grid, (count, 1)))
