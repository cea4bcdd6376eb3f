"""The gate's own CUDA programs (the probe, the smoke program, the launch recorder): their
sources as shipped in gate/cuda, and how long building one may take."""

from __future__ import annotations

from importlib import resources

# The gate's programs compile in seconds; a hung nvcc must not take ten minutes.
BUILD_TIMEOUT = 180.0


def cuda_source(name: str) -> str:
    """The text of a CUDA source shipped in gate/cuda (probe.cu, smoke.cu, ...)."""
    return resources.files("gate").joinpath(f"cuda/{name}").read_text(encoding="utf-8")
