"""The benchmarks' tests use the data stage's made-up corpus and the model tests' fixture pairs."""

from tests.data.conftest import corpus
from tests.model.conftest import data_folder, pairs, vocab

__all__ = ["corpus", "data_folder", "pairs", "vocab"]
