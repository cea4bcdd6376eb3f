"""What the launch recorder wrote about one process: modules loaded, loads, kernels launched.

The recorder (``gate/cuda/launchrec.cpp``, a CUPTI injection library) writes one
``launches.<pid>.json`` per process of an entry point, shaped as
``gate/schemas/launches.schema.json`` says (format ``cuda-gate-launches``, version 2;
version 1, without the modules' cubin facts, still reads),
and beside it each module image that reached the driver from outside the CUDA runtime
(``image-<pid>-<n>.bin``). This module is that file's one decoder: the rest of the gate
sees only the frozen records below.

What the numbers mean:

* ``binary_version`` / ``ptx_version``: the driver's ``CU_FUNC_ATTRIBUTE_BINARY_VERSION``
  and ``CU_FUNC_ATTRIBUTE_PTX_VERSION`` of the launched function (``90``: sm_90 SASS ran,
  compiled from compute_90); ``None`` where the driver was not asked (the runtime
  launched it and CUPTI showed no driver call underneath).
* a module's ``arch``, ``kernels`` and ``sha256`` (version 2): what the cubin the driver
  loaded for this device says of itself (ELF ``e_flags``, ``.symtab`` entry functions)
  and its digest. A kernel the driver was not asked about takes its code from the
  module of its process that holds it (``module_arch``, ``module_sha256``): a runtime
  launch (``cudaLaunchKernel``) shows CUPTI no driver launch to ask about.
* a module's ``origin``: ``runtime`` when it was loaded inside a CUDA runtime call (the
  runtime's own loading of a registered fatbin, found by inspecting files), ``driver``
  when it was loaded by a direct driver call (``cuModuleLoad*``, ``cuLibraryLoad*``,
  ``cudaLibraryLoad*``: a ``.cubin``/``.ptx`` file, NVRTC's or Triton's output). Its image
  is the code CUPTI handed over: the SASS the driver loaded, JIT output included.
* a load: one direct load call, with the file it named or the image it was given, and
  the ``CUresult`` it returned; a load the driver refused appears only here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gate import jsonutil
from gate.errors import BadInputError

FORMAT = "cuda-gate-launches"
VERSION = 2
READABLE = (1, 2)  # 1: modules without arch, kernels and sha256
RECORD_GLOB = "launches.*.json"
# A record names kernels and modules only; torch's come to a few hundred kilobytes.
RECORD_LIMIT = 64 << 20


@dataclass(frozen=True)
class LaunchedKernel:
    """One kernel a process launched: how often, when first, and which code the driver ran."""

    name: str  # the symbol (mangled name) as the driver knows it
    api: str
    count: int
    first_ns: int
    binary_version: int | None = None
    ptx_version: int | None = None
    # Where the driver was not asked: the SM and SHA-256 of the loaded cubin holding it.
    module_arch: int | None = None
    module_sha256: str = ""

    @property
    def sass(self) -> str | None:
        """``sm_90`` for binary version 90: the SASS the driver ran it from."""
        return _arch("sm", self.binary_version)

    @property
    def module_sass(self) -> str | None:
        """``sm_90``: the arch of the loaded cubin that holds it (None when unknown)."""
        return _arch("sm", self.module_arch)

    @property
    def ran_version(self) -> int | None:
        """The SM of the code it ran, as the driver said, else as its module said."""
        return self.binary_version if self.binary_version is not None else self.module_arch

    @property
    def ptx(self) -> str | None:
        """``compute_90`` for PTX version 90: the virtual architecture the code came from."""
        return _arch("compute", self.ptx_version)


@dataclass(frozen=True)
class LoadedModule:
    """One module the driver loaded (CUPTI's module-loaded callback)."""

    module_id: int
    size: int
    origin: str  # runtime | driver
    during: str = ""  # the API call it was loaded in
    file: str = ""  # the file that call named
    image: str = ""  # the image file beside the record ("" when not written)
    note: str = ""
    arch: int | None = None  # the loaded cubin's SM (version 2); None: not a readable cubin
    kernels: tuple[str, ...] = ()  # its entry functions (mangled)
    sha256: str = ""  # of the loaded cubin


@dataclass(frozen=True)
class ModuleLoad:
    """One direct load call (cuModuleLoad*, cuLibraryLoad*), and what the driver answered."""

    api: str
    file: str = ""
    size: int = 0
    image: str = ""
    note: str = ""
    result: int | None = None  # the CUresult; None when the call never returned
    error: str = ""  # its name, CUDA_ERROR_NO_BINARY_FOR_GPU

    @property
    def failed(self) -> bool:
        """The driver refused the module (a non-zero CUresult)."""
        return self.result is not None and self.result != 0


@dataclass(frozen=True)
class ProcessRecord:
    """One process's record, read from ``path``."""

    path: Path
    pid: int
    program: str
    complete: bool  # written at exit, not only at start or a module unload
    modules: tuple[LoadedModule, ...]
    loads: tuple[ModuleLoad, ...]
    kernels: tuple[LaunchedKernel, ...]
    errors: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, doc: Any, path: Path) -> ProcessRecord:  # noqa: ANN401 - parsed JSON
        """The record of ``doc``; BadInputError naming ``path`` and the first problem."""
        at = _At(str(path))
        obj = at.obj(doc)
        if obj.get("format") != FORMAT:
            raise at.fail(f"format is {obj.get('format')!r}, expected {FORMAT!r}")
        version = obj.get("version")
        if version not in READABLE or isinstance(version, bool):
            raise at.fail(f"version {version!r} is not one of 1, {VERSION} (a newer recorder?)")
        modules = tuple(
            _module(at.child("modules", i), m, version) for i, m in at.items(obj, "modules")
        )
        kernels = (_kernel(at.child("kernels", i), k) for i, k in at.items(obj, "kernels"))
        return cls(
            path=path,
            pid=at.int_(obj, "pid"),
            program=at.str_(obj, "program"),
            complete=at.bool_(obj, "complete"),
            modules=modules,
            loads=tuple(_load(at.child("loads", i), m) for i, m in at.items(obj, "loads")),
            kernels=tuple(_from_module(k, modules) for k in kernels),
            errors=tuple(at.child("errors", i).text(e) for i, e in at.items(obj, "errors")),
        )


def read_record(path: Path) -> ProcessRecord:
    """One ``launches.<pid>.json``; BadInputError (one line, naming the file) when it is not one."""
    try:
        data = jsonutil.read_bounded(path, RECORD_LIMIT)
    except OSError as e:
        raise BadInputError(f"{path}: cannot read the launch record: {e.strerror}") from e
    return ProcessRecord.from_json(jsonutil.loads(data, str(path)), path)


def read_folder(folder: Path) -> tuple[ProcessRecord, ...]:
    """Every process record in ``folder``, by pid; none when the folder holds none."""
    if not folder.is_dir():
        return ()
    return tuple(sorted((read_record(p) for p in folder.glob(RECORD_GLOB)), key=lambda r: r.pid))


def launch_counts(records: Sequence[ProcessRecord]) -> dict[str, LaunchedKernel]:
    """Every kernel the processes launched, merged by symbol: counts added, first launch first."""
    merged: dict[str, LaunchedKernel] = {}
    for record in records:
        for k in record.kernels:
            old = merged.get(k.name)
            if old is None:
                merged[k.name] = k
                continue
            merged[k.name] = LaunchedKernel(
                name=k.name,
                api=old.api,
                count=old.count + k.count,
                first_ns=min(old.first_ns, k.first_ns),
                binary_version=old.binary_version
                if old.binary_version is not None
                else k.binary_version,
                ptx_version=old.ptx_version if old.ptx_version is not None else k.ptx_version,
                module_arch=old.module_arch if old.module_arch is not None else k.module_arch,
                module_sha256=old.module_sha256 or k.module_sha256,
            )
    return merged


def _from_module(k: LaunchedKernel, modules: Sequence[LoadedModule]) -> LaunchedKernel:
    """``k`` with the arch and digest of the module holding it, where the driver was not asked.

    The first module of the process that holds the name and whose cubin was read; one
    process loads one cubin per fatbin for its device, so a name held twice is the same
    kernel in two modules (a program and a library both carrying it), told apart nowhere.
    """
    if k.binary_version is not None:
        return k
    for module in modules:
        if module.arch is not None and k.name in module.kernels:
            return replace(k, module_arch=module.arch, module_sha256=module.sha256)
    return k


def _arch(prefix: str, version: int | None) -> str | None:
    return f"{prefix}_{version}" if version is not None and version > 0 else None


def _optional(value: int) -> int | None:
    return None if value < 0 else value


def _module(at: _At, doc: Any, version: int) -> LoadedModule:  # noqa: ANN401 - parsed JSON
    obj = at.obj(doc)
    origin = at.str_(obj, "origin")
    if origin not in ("runtime", "driver"):
        raise at.fail(f"origin is {origin!r}, expected 'runtime' or 'driver'")
    arch: int | None = None
    kernels: tuple[str, ...] = ()
    digest = ""
    if version >= 2:  # the version that added the cubin facts
        arch = _optional(at.int_(obj, "arch", low=-1))
        kernels = tuple(at.child("kernels", i).text(k) for i, k in at.items(obj, "kernels"))
        digest = at.str_(obj, "sha256")
        if digest and (len(digest) != 64 or digest.strip("0123456789abcdef")):
            raise at.fail(f"sha256 {digest[:80]!r} is not a SHA-256 in hex")
    return LoadedModule(
        module_id=at.int_(obj, "id"),
        size=at.int_(obj, "size"),
        origin=origin,
        during=at.str_(obj, "during"),
        file=at.str_(obj, "file"),
        image=_image(at, at.str_(obj, "image")),
        note=at.str_(obj, "note"),
        arch=arch,
        kernels=kernels,
        sha256=digest,
    )


def _load(at: _At, doc: Any) -> ModuleLoad:  # noqa: ANN401 - parsed JSON
    obj = at.obj(doc)
    return ModuleLoad(
        api=at.str_(obj, "api"),
        file=at.str_(obj, "file"),
        size=at.int_(obj, "size"),
        image=_image(at, at.str_(obj, "image")),
        note=at.str_(obj, "note"),
        result=_optional(at.int_(obj, "result", low=-1)),
        error=at.str_(obj, "error"),
    )


def _kernel(at: _At, doc: Any) -> LaunchedKernel:  # noqa: ANN401 - parsed JSON
    obj = at.obj(doc)
    name = at.str_(obj, "name")
    if not name:
        raise at.fail("name is empty")
    return LaunchedKernel(
        name=name,
        api=at.str_(obj, "api"),
        count=at.int_(obj, "count"),
        first_ns=at.int_(obj, "first_ns"),
        binary_version=_optional(at.int_(obj, "binary_version", low=-1)),
        ptx_version=_optional(at.int_(obj, "ptx_version", low=-1)),
    )


def _image(at: _At, name: str) -> str:
    """An image is a plain file name beside the record: never a path that leaves the folder."""
    if name and (name != Path(name).name or name.startswith(".")):
        raise at.fail(f"image {name!r} is not a file name beside the record")
    return name


@dataclass(frozen=True)
class _At:
    """Where in a record a value sits, for one-line errors (``file: kernels[3].count: ...``)."""

    file: str
    key: str = ""

    def child(self, key: str, index: int) -> _At:
        return _At(self.file, f"{self.key}.{key}[{index}]" if self.key else f"{key}[{index}]")

    def fail(self, problem: str) -> BadInputError:
        where = f"{self.file}: {self.key}" if self.key else self.file
        return BadInputError(f"{where}: {problem}")

    def obj(self, doc: Any) -> Mapping[str, Any]:  # noqa: ANN401 - parsed JSON
        if not isinstance(doc, dict):
            raise self.fail(f"expected an object, got {type(doc).__name__}")
        return doc

    def text(self, value: Any) -> str:  # noqa: ANN401 - parsed JSON
        if not isinstance(value, str):
            raise self.fail(f"expected a string, got {value!r}")
        return value

    def str_(self, obj: Mapping[str, Any], key: str) -> str:
        if key not in obj:
            raise self.fail(f"{key} is missing")
        value = obj[key]
        if not isinstance(value, str):
            raise self.fail(f"{key}: expected a string, got {value!r}")
        return value

    def int_(self, obj: Mapping[str, Any], key: str, *, low: int = 0) -> int:
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(f"{key}: expected a whole number >= {low}, got {value!r}")
        return value

    def bool_(self, obj: Mapping[str, Any], key: str) -> bool:
        value = obj.get(key)
        if not isinstance(value, bool):
            raise self.fail(f"{key}: expected true or false, got {value!r}")
        return value

    def items(self, obj: Mapping[str, Any], key: str) -> list[tuple[int, Any]]:
        value = obj.get(key)
        if not isinstance(value, list):
            raise self.fail(f"{key}: expected a list, got {value!r}")
        return list(enumerate(value))
