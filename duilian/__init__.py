"""The couplet service in-process, and the ``duilian`` command line on it.

- ``duilian.inputs``: the checks and normalisation of what a person types (an upper line,
  a lock pattern, 藏头 and 嵌字 characters), each refusal an ``InputError`` in Chinese and
  English; the site answers them 422, the command line prints them;
- ``duilian.service``: a model bundle loaded with its decoder and sensitive-word filters
  (``LoadedModel``), answering ``Query`` objects with plain ``Answer`` dataclasses: the
  candidates with their tones and rule reports, the training-set flag and known lower lines,
  the 横批; no web framework, no worker processes (``serve/`` puts those on top);
- ``duilian.engine``: how a bundle is decoded (``Engine``: int8 or not, the runtime, the graph
  cache) and its decoder built under it (``build_decoder``);
- ``duilian.cli``: the ``duilian`` console script (``duilian generate 春风得意马蹄疾``).

This package imports nothing at its top, so ``duilian --help`` answers before torch loads.
"""
