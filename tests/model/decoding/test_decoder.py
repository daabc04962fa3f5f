"""The beam search with a real (randomly initialised, tiny) CoupletTransformer."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from data.pairing import PairingTable
from data.rules import check
from data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
from model.decoding.decoder import Decoder
from model.decoding.options import MAX_CANDIDATES, DecodeOptions
from model.decoding.plan import ConstraintError
from model.decoding.search import BeamSearch, allocate, run_search
from model.decoding.strategies import _diverse_topk
from model.export.engines import torch_decoder
from model.export.torch_engine import wrap
from model.net.transformer import CoupletTransformer
from tests.model.decoding.fixtures import decode_vocab, tiny_model


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("decode_vocab"), pairs)


@pytest.fixture(scope="module")
def decoder(vocab: Vocab) -> Decoder:
    return torch_decoder(tiny_model(vocab), vocab)


def sequence_logp(model: CoupletTransformer, src: list[int], tgt: list[int], end: bool = True) -> float:
    """Teacher-forced log-probability of ``tgt`` (+ EOS), through ``forward`` (no cache)."""
    with torch.inference_mode():
        logits = model(torch.tensor([src]), torch.tensor([[BOS_ID, *tgt]]))  # (1, T, V)
        logp = F.log_softmax(logits[0].float(), dim=-1)
    return float(sum(logp[i, t] for i, t in enumerate([*tgt, EOS_ID] if end else tgt)))


def test_beam_search_with_a_wide_beam_is_exact(vocab):
    """A beam as wide as every prefix finds the true best sequences; the cached steps give
    the same log-probabilities as the full forward pass."""
    model = tiny_model(vocab, seed=1)
    allowed = vocab.encode("春风秋雨花月")
    length, v = 3, model.cfg.vocab_size
    table = np.full((1, length + 1, v), -np.inf, dtype=np.float32)
    table[0, :length, allowed] = 0.0
    table[0, length, EOS_ID] = 0.0
    src = vocab.encode("千山雪")
    k = len(allowed) ** length  # every sequence survives until the end-of-sequence step
    tokens, search, found = run_search(wrap(model), np.array([src]), table, [], BeamSearch(k))
    seqs = list(itertools.product(allowed, repeat=length))
    with torch.inference_mode():  # every sequence + EOS, teacher-forced in one batch
        tgt = torch.tensor([[BOS_ID, *seq] for seq in seqs])  # (216, 4)
        logp = F.log_softmax(model(torch.tensor([src] * len(seqs)), tgt).float(), dim=-1)
        gold = torch.tensor([[*seq, EOS_ID] for seq in seqs])
        totals = logp.gather(2, gold[:, :, None])[:, :, 0].sum(1)  # (216,)
    brute = dict(zip(seqs, totals.tolist(), strict=True))
    ranked = sorted(brute.values(), reverse=True)
    for rank in range(k):  # (compared by score, so that near-ties may come in either order)
        seq = tuple(tokens[0, rank].tolist())
        assert found[0, rank].item() == pytest.approx(brute[seq], abs=1e-4)
        assert found[0, rank].item() == pytest.approx(ranked[rank], abs=1e-4)
        assert search[0, rank].item() == pytest.approx(ranked[rank], abs=1e-4)
    assert len({tuple(t) for t in tokens[0].tolist()}) == k


def test_candidates_are_distinct_ranked_and_scored_by_the_model(decoder, vocab):
    upper = "风声雨声读书声"
    src = vocab.encode(upper)
    for end in (False, True):
        options = DecodeOptions(n_best=8, rhythm_weight=0, three_level_weight=0, score_end=end)
        result = decoder.generate(upper, options)
        texts = [c.text for c in result.candidates]
        assert len(texts) == 8 == len(set(texts))
        for c in result.candidates:
            expect = sequence_logp(decoder.model.module, src, vocab.encode(c.text), end) / (len(upper) + end)
            assert c.score == pytest.approx(expect, abs=1e-4)
            assert c.report == check(upper, c.text) and c.report.repeats
        scores = [c.score for c in result.candidates]
        assert scores == sorted(scores, reverse=True)  # no preferences: ranked by the model alone
        assert [c.rank_score for c in result.candidates] == pytest.approx(scores, abs=1e-4)
    preferred = decoder.generate(upper, DecodeOptions(n_best=8, rhythm_weight=3.0, three_level_weight=3.0))
    ranks = [c.rank_score for c in preferred.candidates]
    assert ranks == sorted(ranks, reverse=True)  # the order is the rank's, preferences included
    assert all(c.rank_score <= c.score + 1e-6 for c in preferred.candidates)  # the preferences only cost


def test_unknown_characters_are_reported_and_mirrored(decoder, vocab):
    upper = "哔哩哔哩《春风》"
    assert "哔" not in vocab and "《" not in vocab
    result = decoder.generate(upper)
    assert result.unknown_chars == ["哔", "哩"]  # marks are punctuation, known or not
    for c in result.candidates:
        assert len(c.text) == len(upper) and c.text[4] == "《" and c.text[7] == "》"
        assert c.text[0] == c.text[2] != c.text[1] == c.text[3]  # the repeats mirror
        assert check(upper, c.text).hard_ok


def test_rules_off_is_plain_beam_search_with_the_exact_length(decoder, vocab):
    upper = "天天向上，好好学习"
    result = decoder.generate(upper, DecodeOptions(rules=False, n_best=5))
    special = {vocab.piece(i) for i in (PAD_ID, UNK_ID, BOS_ID, EOS_ID)}
    for c in result.candidates:
        assert len(c.text) == len(upper) and not special & set(c.text)
    on = decoder.generate(upper, DecodeOptions(n_best=5))
    assert all(c.report.punctuation and c.report.no_reuse for c in on.candidates)


@pytest.mark.parametrize("diversity", [0.0, 1.0])
def test_batch_gives_the_same_answers_as_one_at_a_time(decoder, diversity):
    uppers = ["春风", "千山雪", "海纳百川有容乃大", "上海自来水来自海上", "一帆风顺", "万里长城"]
    options = DecodeOptions(n_best=3, diversity=diversity)
    batch = decoder.generate_batch(uppers, options, batch_size=2)
    for upper, res in zip(uppers, batch, strict=True):
        one = decoder.generate(upper, options)
        assert res.upper == upper
        assert [c.text for c in res.candidates] == [c.text for c in one.candidates]


def test_user_constraints_in_the_result(decoder):
    upper = "海纳百川有容乃大"
    result = decoder.generate(
        upper, DecodeOptions(locks="__春_____", required_first="东", required_chars="山月")
    )
    for c in result.candidates:
        assert c.text[0] == "东" and c.text[2] == "春" and "山" in c.text and "月" in c.text
        assert check(upper, c.text).hard_ok and c.report.tone_end is True


def test_required_first_after_an_opening_quote(decoder):
    result = decoder.generate("“海纳百川”", DecodeOptions(required_first="东"))
    assert result.candidates
    for c in result.candidates:
        assert c.text[:2] == "“东" and c.text[-1] == "”" and check("“海纳百川”", c.text).hard_ok


def test_impossible_requests_raise(decoder):
    with pytest.raises(ConstraintError, match="no reuse"):
        decoder.generate("春风秋雨", DecodeOptions(required_chars="春"))
    with pytest.raises(ValueError, match="n_best"):
        decoder.generate("春风", DecodeOptions(n_best=MAX_CANDIDATES + 1))
    with pytest.raises(ConstraintError, match="at most"):
        decoder.generate("春" * 101)  # past data.text.LONGEST_LINE


def test_classical_mode_uses_the_rusheng_table(decoder, tmp_path, monkeypatch):
    # 国 is level today; with 国 in the 入声 table the upper ends oblique, so the lower ends level.
    upper = "家国"
    table = tmp_path / "rusheng.txt"
    table.write_text("国竹白", encoding="utf-8")
    monkeypatch.setenv("RUSHENG_TABLE", str(table))
    result = decoder.generate(upper, DecodeOptions(tone_mode="classical"))
    assert result.upper_tones[-1] == "仄" and not result.reads_reversed
    assert all(c.report.tone_end is True for c in result.candidates)
    modern = decoder.generate(upper)
    assert modern.upper_tones[-1] == "平" and modern.reads_reversed


def test_int8_decoder_keeps_the_rules_and_close_scores(decoder, vocab):
    fast = torch_decoder(decoder.model.module, vocab, int8=True)
    upper = "海纳百川有容乃大"
    for c in fast.generate(upper).candidates:
        assert c.report == check(upper, c.text) and check(upper, c.text).hard_ok
        exact = sequence_logp(decoder.model.module, vocab.encode(upper), vocab.encode(c.text), False) / len(
            upper
        )
        assert c.score == pytest.approx(exact, abs=0.05)


def test_classical_mode_without_a_table_file_reads_the_pingshui_rusheng(decoder, monkeypatch):
    monkeypatch.delenv("RUSHENG_TABLE", raising=False)
    result = decoder.generate("家国", DecodeOptions(tone_mode="classical"))  # 国 is 入声 in the 平水韵
    assert result.upper_tones[-1] == "仄" and not result.reads_reversed
    assert all(c.report.tone_end is True for c in result.candidates)


def test_upper_line_ending_level_is_flagged(decoder):
    result = decoder.generate("春风")
    assert result.reads_reversed and result.upper_tones[-1] == "平"
    assert all(c.report.tone_end is True for c in result.candidates)


@pytest.mark.slow
def test_make_eval_compares_rules_on_and_off_and_each_weight(tmp_path, vocab, pairs, decoder):
    from model.net.checkpoint import save
    from model.release.evaluate import main

    (tmp_path / "test.tsv").write_text("".join(f"{u}\t{lo}\n" for u, lo in pairs[:12]), encoding="utf-8")
    save(tmp_path / "model.pt", decoder.model.module, vocab)
    out = tmp_path / "eval"
    assert main(["--model", str(tmp_path / "model.pt"), "--data-dir", str(tmp_path), "--out", str(out),
                 "--compare-rules", "--compare-weights", "--compare-with", "beam_size=1",
                 "--bootstrap", "100"]) == 0  # fmt: skip
    text = (out / "eval.md").read_text(encoding="utf-8")
    assert "| figure | as asked | rules off | rhythm weight 0 | 三平尾 weight 0 | beam_size=1 |" in text

    def row(key: str) -> list[float]:
        line = next(line for line in text.splitlines() if line.startswith(f"| {key} |"))
        return [float(cell) for cell in line.split("|")[2:-1]]

    asked, off, no_rhythm, no_tail, _ = row("full_hard_ok_model")
    assert asked == no_rhythm == no_tail == 100.0  # with the rules every top line keeps the hard rules
    assert off < 100.0  # the random model's lines break them without
    assert row("full_rhythm_model")[2] <= row("full_rhythm_model")[0]  # the preference buys its rate
    # each compared decode against the asked one on the same lines: the paired bootstrap
    paired = next(line for line in text.splitlines() if line.startswith("| full_bleu2_diff |"))
    cells = [cell.strip() for cell in paired.split("|")[2:-1]]
    assert cells[0] == "–" and len(cells) == 5
    bleu2 = row("full_bleu2")
    assert [float(c) for c in cells[1:]] == pytest.approx([b - bleu2[0] for b in bleu2[1:]], abs=0.011)
    wins = next(line for line in text.splitlines() if line.startswith("| full_bleu2_wins |"))
    assert all(0 <= float(c) <= 1 for c in wins.split("|")[3:-1])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope=1", "KEY one of"),
        ("beam_size", "KEY one of"),
        ("beam_size=abc", "not a value"),
        ("rules=maybe", "not a value"),
        ("n_best=0", "at least 1"),
        ("n_best=99", "at most"),
        ("beam_size=0", "at least 1"),
        ("tone_mode=ancient", "tone_mode is one of"),
        ("beam_size=none", None),  # a value the field takes: decoded
    ],
)
def test_make_eval_rejects_a_bad_comparison_before_decoding(
    tmp_path, vocab, pairs, decoder, capsys, spec, message
):
    from model.net.checkpoint import save
    from model.release.evaluate import main

    (tmp_path / "test.tsv").write_text("".join(f"{u}\t{lo}\n" for u, lo in pairs[:3]), encoding="utf-8")
    save(tmp_path / "model.pt", decoder.model.module, vocab)
    args = ["--model", str(tmp_path / "model.pt"), "--data-dir", str(tmp_path), "--out", str(tmp_path / "e")]
    if message is None:
        assert main([*args, "--compare-with", spec, "--bootstrap", "0"]) == 0
        return
    assert main([*args, "--compare-with", spec]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "e").exists()
    key, _, value = spec.partition("=")
    if key in ("n_best", "beam_size") and message.startswith("at "):  # the asked decode's own, alike
        assert main([*args, f"--{key.replace('_', '-')}", value]) == 2
        assert message in capsys.readouterr().err and not (tmp_path / "e").exists()
    assert main([*args, "--greedy", "--compare-rules"]) == 2
    assert main([*args, "--compare-model", str(tmp_path / "none.pt")]) == 2


@pytest.mark.slow
def test_make_eval_compares_another_model_on_the_same_lines(tmp_path, vocab, pairs, decoder):
    """A checkpoint beside the asked one: the same weights give a zero paired difference,
    other weights their own figures."""
    from model.net.checkpoint import save
    from model.release.evaluate import main

    (tmp_path / "test.tsv").write_text("".join(f"{u}\t{lo}\n" for u, lo in pairs[:12]), encoding="utf-8")
    save(tmp_path / "model.pt", decoder.model.module, vocab)
    save(tmp_path / "same.pt", decoder.model.module, vocab)
    torch.manual_seed(5)
    other = CoupletTransformer(decoder.model.cfg)
    save(tmp_path / "other.pt", other, vocab)
    out = tmp_path / "eval"
    args = ["--model", str(tmp_path / "model.pt"), "--data-dir", str(tmp_path), "--out", str(out)]
    models = ["--compare-model", str(tmp_path / "same.pt"), "--compare-model", str(tmp_path / "other.pt")]
    assert main([*args, *models, "--bootstrap", "100"]) == 0
    compared = json.loads((out / "eval.json").read_text(encoding="utf-8"))["compared"]
    same, changed = compared[f"model {tmp_path / 'same.pt'}"], compared[f"model {tmp_path / 'other.pt'}"]
    assert same["full_bleu2_diff"] == 0.0 and same["full_bleu2_wins"] == 0.0
    assert changed["full_perplexity"] != same["full_perplexity"]  # its own model was decoded and scored


def test_allocate_keeps_the_best_of_every_bank():
    total = np.array([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]], dtype=np.float32)
    search, flat = allocate(total, np.array([[0, 0, 0, 0, 1, 2]]), 3, 3)
    assert flat.tolist() == [[0, 4, 5]] and search.tolist() == [[5.0, 1.0, 0.0]]
    # empty banks leave their share to the best of the rest
    search, flat = allocate(total, np.zeros((1, 6), dtype=np.int64), 3, 3)
    assert flat.tolist() == [[0, 1, 2]]


def test_bank_allocation_finds_better_lines_with_required_characters(decoder, pairs, monkeypatch):
    """Plain top-k postpones a costly required character to the end; keeping beams of every
    count finds higher-scoring lines for most upper lines (19 of 25 measured, 4 worse)."""
    import model.decoding.strategies
    from model.decoding.arrays import topk

    uppers = [u for u, _ in pairs[:16] if not set(u) & set("山月")][:6]
    options = DecodeOptions(n_best=5, required_chars="山月")
    banked = [decoder.generate(u, options).candidates[0].score for u in uppers]
    monkeypatch.setattr(model.decoding.strategies, "allocate", lambda total, bank, k, n: topk(total, k))
    plain = [decoder.generate(u, options).candidates[0].score for u in uppers]
    better = sum(b > p + 1e-6 for b, p in zip(banked, plain, strict=True))
    worse = sum(p > b + 1e-6 for b, p in zip(banked, plain, strict=True))
    assert better > worse, (banked, plain)


def test_a_diverse_group_pays_for_a_token_an_earlier_group_took():
    """Three groups of one beam extend the first row: each token an earlier group took costs
    the penalty; the scores come back without it. At the last character (prefix keys given)
    a group may not repeat an earlier group's line at all."""
    neg = float("-inf")
    total = np.array([[[0.0, -0.4, -3.0, neg, neg]]], dtype=np.float32)  # (N=1, width=1, V=5)
    search, flat = _diverse_topk(total, (1, 1, 1), penalty=1.0)
    assert flat.tolist() == [[0, 1, 0]] and search[0].tolist() == pytest.approx([0.0, -0.4, 0.0])
    search, flat = _diverse_topk(total, (1, 1, 1), penalty=0.1)
    assert flat.tolist() == [[0, 0, 0]]  # -0.1 still beats -0.4
    search, flat = _diverse_topk(total, (1, 1, 1), penalty=0.1, keys=np.array([0]))
    assert flat.tolist() == [[0, 1, 2]] and search[0].tolist() == pytest.approx([0.0, -0.4, -3.0])
    # two groups of two beams over two rows each (width 4): group 1 looks at rows 2 and 3 only
    wide = np.full((1, 4, 5), neg, dtype=np.float32)
    wide[0, 0, 0], wide[0, 1, 1], wide[0, 2, 0], wide[0, 3, 2] = -1.0, -2.0, -0.5, -3.0
    search, flat = _diverse_topk(wide, (2, 2), penalty=10.0)
    assert flat.tolist() == [[0, 5 + 1, 3 * 5 + 2, 2 * 5 + 0]]
    assert search[0].tolist() == pytest.approx([-1.0, -2.0, -3.0, -0.5])


def test_diverse_beam_search_gives_one_line_per_group_scored_by_the_model(decoder, vocab):
    """With a penalty far above any score difference, every group takes characters no earlier
    group took at the same position; the candidates keep the rules and the model's scores."""
    upper = "春风得意"
    src = vocab.encode(upper)
    plain = decoder.generate(upper, DecodeOptions(n_best=6, rhythm_weight=0, three_level_weight=0))
    options = DecodeOptions(n_best=6, rhythm_weight=0, three_level_weight=0, diversity=100.0)
    diverse = decoder.generate(upper, options)
    texts = [c.text for c in diverse.candidates]
    assert len(texts) == 6
    for i in range(len(upper)):
        assert len({t[i] for t in texts}) == 6
    assert any(len({c.text[i] for c in plain.candidates}) < 6 for i in range(len(upper)))
    for c in diverse.candidates:
        assert check(upper, c.text).hard_ok
        assert c.score == pytest.approx(
            sequence_logp(decoder.model.module, src, vocab.encode(c.text), False) / 4, abs=1e-4
        )
    scores = [c.score for c in diverse.candidates]
    assert scores == sorted(scores, reverse=True)  # best first, whichever group found it


def test_the_pairing_table_adds_its_scores_to_the_search(vocab: Vocab, pairs: list[tuple[str, str]]) -> None:
    """Each candidate's rank rises by the weight times its mean pairing score (the model's own
    score is unchanged), and a heavy weight puts the best-paired characters first."""
    table = PairingTable.count(pairs + [("春风", "秋雨")] * 50)
    model = tiny_model(vocab, seed=2)
    plain, paired = torch_decoder(model, vocab), torch_decoder(model, vocab, pairing=table)
    options = DecodeOptions(n_best=20, beam_size=40, rules=False, locks="秋_")  # every line pairs 春 -> 秋
    upper = "春风"
    before = {c.text: c for c in plain.generate(upper, options).candidates}
    after = paired.generate(upper, replace(options, pairing_weight=0.05)).candidates
    common = [c for c in after if c.text in before]
    assert len(common) >= 10
    for c in common:
        bonus = 0.05 * table.line_score(upper, c.text)
        assert bonus > 0
        assert c.rank_score == pytest.approx(before[c.text].rank_score + bonus, abs=1e-3)
        assert c.score == pytest.approx(before[c.text].score, abs=1e-4)
    assert paired.generate(upper, replace(options, pairing_weight=0.0)).candidates == list(before.values())
    heavy = paired.generate(upper, replace(options, pairing_weight=50.0, locks=None)).candidates[0]
    assert heavy.text == "秋雨"


def test_greedy_is_a_sibling_strategy_and_strategies_are_chosen_by_declared_capabilities(vocab):
    """GreedySearch keeps one beam, the best continuation at each step: on a model whose
    steps are checked by hand it equals step-by-step argmax; strategy_for picks banked for a
    rule with banks, diverse for groups, greedy for a beam of one."""
    from model.decoding.score_rules import StepRuleBase
    from model.decoding.search import BankedBeamSearch, DiverseBeamSearch, GreedySearch, strategy_for

    model = tiny_model(vocab, seed=5)
    length, v = 4, model.cfg.vocab_size
    table = np.zeros((1, length + 1, v), dtype=np.float32)
    table[0, :length, : EOS_ID + 1] = float("-inf")
    table[0, length] = float("-inf")
    table[0, length, EOS_ID] = 0.0
    src = torch.tensor([vocab.encode("千山鸟飞")])
    tokens, search, _ = run_search(wrap(model), src.numpy(), table, [], GreedySearch())
    with torch.inference_mode():  # argmax step by step, through the full forward pass
        prefix: list[int] = []
        for pos in range(length):
            logits = model(src, torch.tensor([[BOS_ID, *prefix]]))[0, pos].float()
            prefix.append(int((F.log_softmax(logits, -1) + torch.from_numpy(table[0, pos])).argmax()))
    assert tokens[0, 0].tolist() == prefix and search.shape == (1, 1)

    class Banked(StepRuleBase):
        n_banks = 3

        def __call__(self, scores, step):
            return scores

    assert isinstance(strategy_for([Banked()], 8, groups=(4, 4)), BankedBeamSearch)
    assert isinstance(strategy_for([], 8, groups=(4, 4), diversity=1.0), DiverseBeamSearch)
    assert isinstance(strategy_for([], 1), GreedySearch)
    assert type(strategy_for([], 8)) is BeamSearch
