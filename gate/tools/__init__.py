"""NVIDIA's tools the gate runs beside its own reader (cuobjdump), the gate's own CUDA
programs and their build timeout (programs), and those programs built once per toolchain
(buildcache)."""
