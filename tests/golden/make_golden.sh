#!/bin/sh
# Rebuilds the golden binaries (nvcc 13.0); tests that run without nvcc read these files.
set -eu
cd "$(dirname "$0")"
# multi-arch object: plain, 'a' and 'f' SASS, two PTX (PTX zstd-compressed by default)
nvcc -c -o multi.o kernels.cu -gencode arch=compute_90,code=[sm_90,compute_90] \
  -gencode arch=compute_120f,code=sm_120f -gencode arch=compute_100a,code=[sm_100a,compute_100a]
# shared library with a device-link stub per arch, PTX compressed with LZ4 (--compress-mode=speed)
nvcc -shared -Xcompiler -fPIC -cudart shared --compress-mode=speed -o libkernels.so kernels.cu \
  -gencode arch=compute_80,code=[sm_80,compute_80] -gencode arch=compute_120,code=sm_120
# every entry zstd-compressed, debug (-G)
nvcc -fatbin -G -o debug.fatbin kernels.cu -gencode arch=compute_90,code=[sm_90,compute_90]
# raw cubin
nvcc -cubin -o sm_90a.cubin kernels.cu -arch sm_90a
# LTO IR (kind 8) next to SASS, in a static archive
nvcc -c -dc -o lto.o kernels.cu -gencode arch=compute_90,code=[lto_90,sm_90]
rm -f libkernels.a && ar rcs libkernels.a lto.o && rm -f lto.o
