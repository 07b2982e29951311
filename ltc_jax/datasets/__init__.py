"""Real datasets bundled with ltc_jax, readers for the formats they come in, and a
simulated plant of sensor streams."""

from ._bundled import load_japanese_vowels as load_japanese_vowels
from ._dataset import (
    POOL_STATISTICS as POOL_STATISTICS,
    SequenceDataset as SequenceDataset,
    channel_statistics as channel_statistics,
    check_same_classes as check_same_classes,
    concatenate as concatenate,
    drop_observations as drop_observations,
    hold_last as hold_last,
    pool_channels as pool_channels,
    standardize as standardize,
    standardize_with as standardize_with,
    stratified_folds as stratified_folds,
    stratified_split as stratified_split,
)
from ._ecg import (
    MITBIH_208_SAMPLE_RATE_HZ as MITBIH_208_SAMPLE_RATE_HZ,
    forecast_windows as forecast_windows,
    load_mitbih_208 as load_mitbih_208,
    mitbih_208_windows as mitbih_208_windows,
)
from ._plant import (
    SENSOR_GROUPS as SENSOR_GROUPS,
    PlantStreams as PlantStreams,
    simulate_plant as simulate_plant,
)
from ._streams import (
    EVENT_GROUPS as EVENT_GROUPS,
    SensorStreams as SensorStreams,
    StreamWindows as StreamWindows,
    read_sensor_log as read_sensor_log,
    stream_windows as stream_windows,
)
from ._ts_format import TSFormatError as TSFormatError, read_ts as read_ts


__all__ = [
    "SequenceDataset",
    "load_japanese_vowels",
    "load_mitbih_208",
    "mitbih_208_windows",
    "forecast_windows",
    "MITBIH_208_SAMPLE_RATE_HZ",
    "read_ts",
    "TSFormatError",
    "standardize",
    "standardize_with",
    "channel_statistics",
    "check_same_classes",
    "concatenate",
    "stratified_folds",
    "stratified_split",
    "drop_observations",
    "hold_last",
    "pool_channels",
    "POOL_STATISTICS",
    "simulate_plant",
    "PlantStreams",
    "SENSOR_GROUPS",
    "SensorStreams",
    "StreamWindows",
    "stream_windows",
    "read_sensor_log",
    "EVENT_GROUPS",
]
