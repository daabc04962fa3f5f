"""Release steps: evaluation and its metrics, writing a bundle, the model card, the blind
comparison, the reranker made, and finishing a run (evaluate, export, card, ship). Imports any
model layer below it and data/."""
