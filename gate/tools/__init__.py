"""NVIDIA's tools the gate runs beside its own reader (cuobjdump), and the gate's own small
programs built once per toolchain (buildcache)."""
