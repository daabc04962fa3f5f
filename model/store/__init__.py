"""A model bundle as it lies on disk, read to serve without PyTorch: its files and manifest, the
bundle itself, the training lines' fingerprints and known lower lines, the weights read with
numpy. Imports model.spec, model.decoding's tables and data/."""
