"""Graph builders for hack/gen_catalog.py: reference architectures as graph-only ONNX models."""
