"""The shipped model with the shipped word list: the answers issue 25 found empty are whole,
and no candidate holds a listed word where it would be a word of the line."""

from __future__ import annotations

import pytest

from data.paths import default_model_dir, graph_cache_dir
from data.segment import boundaries
from duilian.engine import Engine
from duilian.inputs import Query
from duilian.service import LoadedModel, allow_list
from model.store.bundle import load_bundle

CASES = [
    ("鸟声、泉声、钟磬声，声声悦耳", None),  # 声声 makes the model's favourite 色色
    ("寸土为寺，寺旁言诗，诗曰：明月送僧归古寺。", None),  # 山下作画 was withheld
    ("水上吟诗", "_下作_"),  # the user's own 下作 straddles 水上/吟诗
    ("岁月如歌", None),
]


@pytest.fixture(scope="module")
def model() -> LoadedModel:
    return LoadedModel.load(
        default_model_dir(), engine=Engine(int8=True, runtime="onnx", graph_cache=graph_cache_dir())
    )


def test_the_shipped_bundle_carries_the_table() -> None:
    bundle = load_bundle(default_model_dir())
    assert bundle.blocked is not None and len(bundle.blocked) > 1000


@pytest.mark.parametrize(("upper", "locks"), CASES)
def test_answers_are_whole_and_clean(model: LoadedModel, upper: str, locks: str | None) -> None:
    answer = model.answer_batch([Query(upper, 20, locks=locks)], 0)[0]
    assert not isinstance(answer, Exception), answer
    texts = [c.text for c in answer.candidates]
    assert len(texts) == 20 and answer.filtered == 0
    words = model.bundle.sensitive_filter(allow_list())
    assert all(words.is_clean(t, boundaries(upper)) for t in texts)
    if locks:
        assert all(t[1:3] == "下作" for t in texts)
