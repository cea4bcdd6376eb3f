"""Write real cuTile inputs into a folder: run by tests/tileir_inputs.py with the Python of a
venv holding cuda-tile 1.7.0, tileiras 13.4 and nvFatbin (tests/pypi_wheels.TILE).

Everything here is NVIDIA's output: ``export_kernel`` writes the Tile IR bytecode and the
cubins (tileiras), ``cuda.bindings.nvfatbin`` the fatbins. No GPU is needed.

    python tileir_build.py OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct  # type: ignore[import-not-found]  # the venv's, not the gate's
from cuda.bindings import nvfatbin  # type: ignore[import-not-found]
from cuda.tile import compilation as c

TILE = 16


@ct.kernel
def vector_add(a, b, out):  # type: ignore[no-untyped-def]
    """out = a + b, a tile at a time."""
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=x + y)


def _signature(dtype: object) -> c.KernelSignature:
    array = c.ArrayConstraint(dtype, 1, index_dtype=ct.int32, stride_lower_bound_incl=0,
                              alias_groups=(), may_alias_internally=False)  # fmt: skip
    return c.KernelSignature([array, array, array], c.CallingConvention.cutile_python_v1())


def _fatbin(cubins: list[tuple[bytes, str]], tile: bytes | None) -> bytes:
    handle = nvfatbin.create(["-64"], 1)
    for cubin, arch in cubins:
        nvfatbin.add_cubin(handle, cubin, len(cubin), arch, "vector_add")
    if tile is not None:
        nvfatbin.add_tile_ir(handle, tile, len(tile), "vector_add", "")
    out = bytearray(nvfatbin.size(handle))
    nvfatbin.get(handle, out)
    nvfatbin.destroy(handle)
    return bytes(out)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    f32 = _signature(ct.float32)
    c.export_kernel(vector_add, [f32], str(out / "vadd.tileir"), output_format="tileir_bytecode")
    # One module, two kernels (one per signature): names past the first function's hints.
    c.export_kernel(vector_add, [f32, _signature(ct.float16)], str(out / "two.tileir"),
                    output_format="tileir_bytecode")  # fmt: skip
    for sm in ("sm_90", "sm_120"):
        c.export_kernel(vector_add, [f32], str(out / f"vadd_{sm}.cubin"), gpu_code=sm,
                        output_format="cubin")  # fmt: skip
    tile = (out / "vadd.tileir").read_bytes()
    sm90 = (out / "vadd_sm_90.cubin").read_bytes()
    sm120 = (out / "vadd_sm_120.cubin").read_bytes()
    (out / "tile_only.fatbin").write_bytes(_fatbin([], tile))
    (out / "cubin_tile.fatbin").write_bytes(_fatbin([(sm90, "90")], tile))
    (out / "cubin120.fatbin").write_bytes(_fatbin([(sm120, "120")], None))
    (out / "done").write_text("ok\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
