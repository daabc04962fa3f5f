"""PyTorch models out and back: their ONNX graphs (traced once a shape, then made and cached),
int8 copies, the eager engine, the Decoder of PyTorch models, a bundle's models read into
PyTorch and its weights written. The only layer below the release steps that serving reaches,
and only where a bundle's graphs are not cached yet (duilian/engine.py)."""
