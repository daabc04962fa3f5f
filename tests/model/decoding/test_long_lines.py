"""Long couplets (model/decoding/long_lines.py): upper lines of 33 to 100 characters, answered
segment by segment by a real tiny model, every hard rule kept on the whole line."""

from __future__ import annotations

import itertools

import pytest
import torch

from data.rules import check
from data.text import is_punct
from data.vocab import Vocab
from model.decoding.decoder import Decoder
from model.decoding.long_lines import LONG_FROM, SEGMENT_CHARS, segments
from model.decoding.options import DecodeOptions
from model.decoding.plan import ConstraintError
from model.export.engines import torch_decoder
from tests.model.decoding.fixtures import decode_vocab, tiny_model, tiny_tagger

# the example (35 characters), a 长联 of clauses joined from the fixture couplets with
# characters repeated across its segments, and one of 100 characters with a long unpunctuated run
SMITH = "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南打东西"
REPEATS = "风声雨声读书声，声声入耳；家事国事天下事，事事关心。天增岁月人增寿，春回大地，风声依旧。"
HUNDRED = ("海纳百川有容乃大两个黄鹂鸣翠柳白日依山尽，" * 5)[:100]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("long_vocab"), [*pairs, (SMITH, SMITH)])


@pytest.fixture(scope="module")
def decoder(vocab: Vocab) -> Decoder:
    return torch_decoder(tiny_model(vocab, seed=7), vocab, proposer=tiny_tagger(vocab, seed=8))


def texts(decoder: Decoder, upper: str, **options: object) -> list[str]:
    with torch.inference_mode():
        result = decoder.generate(upper, DecodeOptions(n_best=5, **options))  # type: ignore[arg-type]
    assert result.upper == upper
    return [c.text for c in result.candidates]


@pytest.mark.parametrize("upper", [SMITH, REPEATS, HUNDRED])
def test_segments_cover_the_line_in_order_within_their_size(upper: str) -> None:
    spans = segments(upper)
    assert spans[0][0] == 0 and spans[-1][1] == len(upper)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # no gap, no overlap
    assert all(0 < end - start <= SEGMENT_CHARS for start, end in spans)
    assert all(not is_punct(upper[start]) for start, _ in spans)  # a mark stays with its clause


def test_clauses_are_joined_while_they_fit() -> None:
    assert [SMITH[a:b] for a, b in segments(SMITH)] == [
        "白塔街，黄铁匠，生红炉，烧黑炭，",
        "冒青烟，闪蓝光，淬紫铁，",
        "坐北朝南打东西",
    ]
    assert segments("春风得意马蹄疾，" * 2) == [(0, 16)]


@pytest.mark.parametrize("upper", [SMITH, REPEATS, HUNDRED])
def test_every_hard_rule_holds_on_the_whole_long_line(decoder: Decoder, upper: str) -> None:
    assert len(upper) >= LONG_FROM
    lines = texts(decoder, upper)
    assert len(lines) == len(set(lines)) == 5
    for line in lines:
        report = check(upper, line)
        assert report.hard_ok, (line, report)
        assert not set(line) & {ch for ch in upper if not is_punct(ch)}  # no reuse, across segments


def test_a_character_repeated_across_segments_is_repeated_in_the_lower_line(decoder: Decoder) -> None:
    """声 and 事 come back in later segments of REPEATS: the lower line's character there is the
    one the earlier segment chose; a new character of the upper line gets a new one."""
    spans = segments(REPEATS)
    assert len(spans) >= 3
    for line in texts(decoder, REPEATS):
        for ch in "声事风":
            at = [i for i, u in enumerate(REPEATS) if u == ch]
            assert len({line[i] for i in at}) == 1, (ch, line)
        firsts = {REPEATS.index(u) for u in REPEATS if not is_punct(u)}
        assert len({line[i] for i in firsts}) == len(firsts), line  # no other repeat


def test_locks_and_the_head_character_reach_their_segments(decoder: Decoder) -> None:
    locks = "_" * (len(SMITH) - 3) + "月__"  # in the last segment
    lines = texts(decoder, SMITH, locks=locks, required_first="春")  # 藏头: the first segment's
    assert all(line[0] == "春" and line[-3] == "月" for line in lines), lines
    assert all(check(SMITH, line).hard_ok for line in lines)


def test_impossible_or_unsupported_requests_are_refused_in_both_languages(decoder: Decoder) -> None:
    with pytest.raises(ConstraintError, match="嵌字"):
        texts(decoder, SMITH, required_chars="春")
    with pytest.raises(ConstraintError, match="lock pattern"):
        texts(decoder, SMITH, locks="春__")
    locks = "_" * (len(SMITH) - 1) + "白"  # 白 is in the upper line
    with pytest.raises(ConstraintError):
        texts(decoder, SMITH, locks=locks)


def test_short_lines_are_answered_as_before(decoder: Decoder) -> None:
    """The segment path is only for long lines: a 32-character line is one search."""
    line = "海纳百川有容乃大两个黄鹂鸣翠柳白日依山尽明月松间照春回大地山清水"
    assert len(line) == LONG_FROM - 1 and len(segments(line)) > 1
    with torch.inference_mode():
        whole = decoder.generate(line, DecodeOptions(n_best=3))
        _view, plan = decoder.plan_view(line, DecodeOptions(n_best=3))
        again = decoder.decode_plans([plan], DecodeOptions(n_best=3))[0]
    assert again is not None and [c.text for c in whole.candidates] == [c.text for c in again.candidates]


@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.parametrize(
    "upper",
    [
        # first characters of clauses: no rhythm preference there to choose the tone by chance
        "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南一片白",
        "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南满地黄",
        "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南万物生",
        "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南一江烟",
    ],
)
def test_a_last_character_repeating_an_earlier_segment_gets_its_end_tone_there(
    decoder: Decoder, upper: str, n: int
) -> None:
    """The line's last character repeats one of an earlier segment, so the lower line's end is
    the character chosen back there: the tone-end rule is asked of that segment's position
    (else the last segment could find its end locked to a character of the wrong tone)."""
    with torch.inference_mode():
        lines = [c.text for c in decoder.generate(upper, DecodeOptions(n_best=n)).candidates]
    first = upper.index(upper[-1])
    assert first < segments(upper)[-1][0]
    for line in lines:
        assert line[first] == line[-1] and check(upper, line).hard_ok, line


def test_the_long_lines_end_tone_is_reported(decoder: Decoder) -> None:
    with torch.inference_mode():
        result = decoder.generate(SMITH, DecodeOptions(n_best=1))  # ends 西: level
    assert result.upper_tones is not None and result.upper_tones[-1] == "平" and result.reads_reversed
