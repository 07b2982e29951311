"""Real datasets bundled with ltc_jax, and readers for the formats they come in."""

from ._bundled import load_japanese_vowels as load_japanese_vowels
from ._dataset import (
    SequenceDataset as SequenceDataset,
    drop_observations as drop_observations,
    standardize as standardize,
)
from ._ts_format import TSFormatError as TSFormatError, read_ts as read_ts
