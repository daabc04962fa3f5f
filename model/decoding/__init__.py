"""Decoding under the couplet rules, on ONNX Runtime and numpy (no PyTorch): options and
results, request planning and rule tables, the beam search, the shortlist, the graphs and
engines, the reranker, and the Decoder. Imports model.spec and data/."""
