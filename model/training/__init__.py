"""Training: the pairs and their batches, losses, the trainer, presets, hardware sizing, a
run, and packing a run on a lent GPU machine. Imports model.net and data/, never
pypinyin or pyahocorasick (the device image lacks them; tests/model/training/test_imports.py)."""
