"""Release steps: evaluation and its metrics, the bundle and its fingerprints, the model
card, the blind comparison, and finishing a run (evaluate, export, card, ship). Imports
any model layer below it and data/."""
