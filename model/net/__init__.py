"""The torch modules (encoder-decoder, tagger, the reranker's scorer), the batch they read, and
checkpoints. Imports torch, model.spec and data/."""
