"""The model: four layers, each importing only from the layers under it and from data/
(docs/ARCHITECTURE.md, "Model layers"):

- ``model.net``: the torch modules, their config, batches as they read them, checkpoints;
- ``model.training``: pairs, batches, losses, the trainer, presets, hardware, packing;
  imports without pypinyin and pyahocorasick;
- ``model.decoding``: options, request planning and rule tables, the search, the shortlist,
  the ONNX engine, the Decoder;
- ``model.release``: evaluation, the bundle, the card, the blind comparison, finishing a run.

The modules at the top (``model.train``, ``model.evaluate``, ``model.card``, ``model.ship``,
``model.blind``) are the command-line entry points above all four.
"""
