"""The test set of a data folder decoded once and scored whole and on its leak-free part
(``evaluate_files``), and the flat summary of the figures (``summary``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from data.pairing import PairingTable
from data.text import REGISTERS
from data.vocab import Vocab
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, Runtime
from model.net.checkpoint import CoupletModel
from model.release.eval_decode import make_decoder
from model.release.metrics import BLEU_ORDERS, BOOTSTRAP, score_split
from model.training.pairs import read_tsv


def read_flags(path: Path, n: int) -> list[bool] | None:
    if not path.exists():
        return None
    flags = [line.strip() == "1" for line in path.read_text().splitlines() if line.strip()]
    return flags if len(flags) >= n else None


def evaluate_files(
    model: CoupletModel,
    vocab: Vocab,
    folder: Path,
    limit: int | None = None,
    train_lowers: Iterable[str] = (),
    options: Any = None,
    use_greedy: bool = False,
    proposer: Any = None,
    int8: bool = SERVE_INT8,
    runtime: Runtime = SERVE_RUNTIME,
    n_bootstrap: int = BOOTSTRAP,
    lines_out: list[tuple[str, str]] | None = None,
    pairing: PairingTable | None = None,
    progress: bool | None = None,
    desc: str = "decoding the test set",
    reranker: Any = None,
) -> dict[str, Any]:
    """Decode the test set once; score it whole and its leak-free part (perplexity is the
    model's; a ``proposer`` is the tagger the decoder uses, see ``DecodeOptions``;
    ``n_bootstrap``: resamples for BLEU's confidence intervals, 0 for none; ``lines_out``, a
    list, receives (reference, top candidate) for each line, for a paired comparison;
    ``progress``: a bar of the lines decoded on stderr, named ``desc``, None: on a terminal;
    ``reranker``: the bundle's, when it has one, so the top line is the site's)."""
    tone_mode = getattr(options, "tone_mode", "modern")
    register = REGISTERS.index(getattr(options, "register", "general"))
    test_path = folder / "test.tsv"
    if not test_path.is_file():
        raise FileNotFoundError(f"missing {test_path}; run `make data` first")
    test = read_tsv(test_path)[: limit or None]
    if not test:
        raise ValueError(f"no test pairs (upper<TAB>lower lines) in {test_path}")
    decode = make_decoder(
        model.eval(),
        vocab,
        options,
        use_greedy,
        proposer,
        int8,
        runtime,
        pairing,
        progress,
        desc,
        reranker=reranker,
    )
    hyps = decode([u for u, _ in test])
    if lines_out is not None:
        lines_out.extend(zip([lo for _, lo in test], hyps, strict=True))
    lowers = set(train_lowers)
    flags = read_flags(folder / "test_leak.txt", len(test))
    whole = score_split(model, vocab, test, hyps, lowers, tone_mode, n_bootstrap, register)
    result: dict[str, Any] = {"full": whole}
    if flags is not None:
        keep = [i for i in range(len(test)) if not flags[i]]
        result["leakfree"] = score_split(
            model, vocab, [test[i] for i in keep], [hyps[i] for i in keep], lowers, tone_mode, n_bootstrap,
            register,
        )  # fmt: skip
    result["options"] = (
        asdict(options) if options is not None and hasattr(options, "__dataclass_fields__") else {}
    )
    fast = proposer is not None and getattr(options, "fast", False)
    result["decoder"] = (
        "greedy"
        if use_greedy
        else "model.decode"  # the label eval.json has always recorded
        + (" fast (proposer)" if fast else "")
        + (" int8" if int8 else "")
        + f" ({runtime})"
    )
    # No example lines here: the result goes into the shipped bundle, and the test set is AGPL text.
    result["summary"] = summary(result)
    return result


def summary(result: dict[str, Any]) -> dict[str, float]:
    flat: dict[str, float] = {}
    for split in ("full", "leakfree"):
        r = result.get(split)
        if not r:
            continue
        for key in (
            "bleu1",
            "bleu2",
            "bleu4",
            "perplexity",
            "distinct1",
            "distinct2",
            "verbatim_train_lower",
        ):
            flat[f"{split}_{key}"] = r[key]
        for n in BLEU_ORDERS:
            if f"bleu{n}_ci95" in r:
                flat[f"{split}_bleu{n}_ci95"] = r[f"bleu{n}_ci95"]
        for key in ("hard_ok", "tone_end"):
            flat[f"{split}_{key}_model"] = r["rules_model"][key]
            flat[f"{split}_{key}_human"] = r["rules_human"][key]
        for key in ("rhythm", "no_three_level_tail"):  # the preferences' own rates
            if key in r["rules_model"]:
                flat[f"{split}_{key}_model"] = r["rules_model"][key]
    return flat
