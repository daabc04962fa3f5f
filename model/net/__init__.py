"""The torch modules (encoder-decoder, tagger), their config, the batch they read, and
checkpoints. Imports torch and data/ only."""
