"""Loaders for the real datasets bundled with ltc_jax (provenance in data/README.md)."""

import importlib.resources

from ._dataset import SequenceDataset
from ._ts_format import read_ts


def _data_file(name: str):
    return importlib.resources.files("ltc_jax.datasets") / "data" / name


def load_japanese_vowels() -> tuple[SequenceDataset, SequenceDataset]:
    """The UCI Japanese Vowels dataset, as in the UEA multivariate archive.

    Nine male speakers each uttered the vowels /ae/; each utterance is a sequence of
    12 LPC cepstrum coefficients, 7 to 29 frames long. Task: identify the speaker.
    Times are frame indices (`0, 1, ...`), so time is measured in frames.

    **Returns:** `(train, test)`: 270 and 370 sequences, 12 channels, lengths 7 to
    29, 9 classes (labels `"1"` to `"9"`), padded to 26 (train) and 29 (test)
    frames, unstandardised.

    ??? cite "References"

        ```bibtex
        @article{kudo1999multidimensional,
            title={Multidimensional curve classification using passing-through
                   regions},
            author={Kudo, Mineichi and Toyama, Jun and Shimbo, Masaru},
            journal={Pattern Recognition Letters},
            volume={20}, number={11--13}, pages={1103--1111}, year={1999}
        }
        @article{bagnall2018uea,
            title={The {UEA} multivariate time series classification archive, 2018},
            author={Bagnall, Anthony and Dau, Hoang Anh and Lines, Jason and
                    Flynn, Michael and Large, James and Bostrom, Aaron and
                    Southam, Paul and Keogh, Eamonn},
            journal={arXiv:1811.00075}, year={2018}
        }
        ```
    """
    with importlib.resources.as_file(_data_file("JapaneseVowels_TRAIN.ts")) as path:
        train = read_ts(path)
    with importlib.resources.as_file(_data_file("JapaneseVowels_TEST.ts")) as path:
        test = read_ts(path, class_names=train.class_names)
    return train, test
