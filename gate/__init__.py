"""cuda-gate: a release gate for CUDA build artifacts."""

__version__ = "0.1.0"
