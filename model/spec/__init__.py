"""What the nets (model/net/) and the engines that run them (model/decoding/) agree on, without
PyTorch: a model's configuration, the capabilities it declares to the search, how the
reranker's scorer reads a pair. Imports data/ only."""
