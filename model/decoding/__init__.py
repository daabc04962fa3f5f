"""Decoding under the couplet rules: options and results, request planning and rule tables,
the beam search, the shortlist, int8 copies, the ONNX engine, and the Decoder. Imports
model.net and data/."""
