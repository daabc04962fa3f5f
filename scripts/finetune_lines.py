"""Top lines of the shipped bundle's decoding with its encoder-decoder's weights replaced by a
checkpoint's (rounded to fp16, as a bundle stores them), beside the shipped weights' own:
file: systems for model.blind (docs/EXPERIMENTS.md §36).

    python scripts/finetune_lines.py work/train/ft_s24/best.pt work/blind/lines_G.tsv work/blind/ft_G
"""

import sys
from pathlib import Path

from data.paths import default_model_dir, graph_cache_dir
from duilian.engine import blocked_words, set_decode_threads
from duilian.inputs import Query
from duilian.service import decode_options
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.net.checkpoint import load_model
from model.store.bundle import load_bundle

ckpt, lines_file, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
set_decode_threads(1)
bundle = load_bundle(default_model_dir())
new, vocab, _ = load_model(ckpt)
assert vocab.pieces == bundle.vocab.pieces
new = new.half().float().eval()
uppers = [line.split("\t")[0] for line in lines_file.read_text(encoding="utf-8").splitlines() if line]
out.mkdir(parents=True, exist_ok=True)
for name, model in (("ft", new), ("shipped", models_of(bundle).model)):
    dec = torch_decoder(
        model,
        bundle.vocab,
        int8=SERVE_INT8,
        proposer=models_of(bundle).proposer,
        runtime=SERVE_RUNTIME,
        pairing=bundle.pairing,
        blocked=blocked_words(bundle, None),
        graph_cache=graph_cache_dir(),
    )
    rows = []
    for upper in uppers:
        res = dec.generate(upper, decode_options(Query(upper, 10), 10))
        rows.append(f"{upper}\t{res.candidates[0].text if res.candidates else ''}\n")
    (out / f"{name}.tsv").write_text("".join(rows), encoding="utf-8")
a = (out / "ft.tsv").read_text(encoding="utf-8").splitlines()
b = (out / "shipped.tsv").read_text(encoding="utf-8").splitlines()
print(f"{sum(x != y for x, y in zip(a, b, strict=True))} of {len(a)} top lines differ")
