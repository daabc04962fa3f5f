"""Imported once by the forkserver that forks the decode workers (serve/pool.py), so that
every worker, a replacement for a dead one included, starts with what does not depend on the
model already in memory: the service's modules, pypinyin with its phrase reader
(data/tones.py ``warm``), and the segmentation's tokenizer (the sensitive-word filter's word
boundaries, data/segment.py: its dictionary is read by first character, the parts a worker
reads with ``pread``, so the forked workers share no file offset). Not ONNX Runtime:
importing it starts threads of its own, and the forkserver forks (numpy's OpenBLAS pool, the
one other thread here, stops itself around a fork); each worker imports it after its fork, in
a few hundredths of a second. Not PyTorch either: a worker imports it only to export the
graphs the cache lacks (duilian/engine.py's ``build_decoder``), once per model and machine."""

from __future__ import annotations

import duilian.service  # noqa: F401
import model.decoding.onnx_engine  # noqa: F401
from data import tones
from data.segment import boundaries

boundaries("春风得意")  # loads the dictionary
tones.warm()
