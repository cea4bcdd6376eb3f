"""Target placeholders in build commands: the detected target in the forms build systems use.

The gate never hard-codes a target, and neither should a project's build: its
configured build commands and their environment values name the target through
these placeholders, filled in with the targets the gate requires (the detected one
first). For ``sm_90`` / ``sm_121`` / ``sm_110``:

* ``{sm}``: ``sm_90`` / ``sm_121`` / ``sm_110`` (``nvcc -arch``, ``--gpu-code``)
* ``{compute}``: ``compute_90`` / ``compute_121`` / ``compute_110``
* ``{cc}``: ``90`` / ``121`` / ``110`` (file names, ``-DSM=``)
* ``{capability}``: ``9.0`` / ``12.1`` / ``11.0`` (tools that take X.Y)
* ``{gencode}``: ``-gencode`` flags for SASS + PTX of every target (nvcc command lines)
* ``{cmake_archs}``: ``90`` / ``121`` / ``110``, ``;``-joined (``CMAKE_CUDA_ARCHITECTURES``)
* ``{torch_arch_list}``: ``9.0+PTX`` / ``12.1+PTX``, ``;``-joined (``TORCH_CUDA_ARCH_LIST``)
* ``{nvcc}``: the gate's own nvcc, such as ``/usr/local/cuda/bin/nvcc``
  (``-DCMAKE_CUDA_COMPILER={nvcc}``)
* ``{python}``: the project's Python interpreter (the one with torch), named by
  ``--python``, ``CUDA_GATE_PYTHON`` or the ``python`` key; by default the first
  ``python3`` on PATH outside the gate's own virtual environment

``{nvcc}`` makes the build use the toolkit the gate recorded in its evidence, not
whichever nvcc CMake or a setup script finds first; ``{python}`` makes builds and
entry points use the user's interpreter, not the virtual environment Nox put first
on PATH. Entry points take only these two (tool) placeholders.

* ``{sm}``, ``{compute}``, ``{cc}`` and ``{capability}`` name ONE target; with several
  required targets they are an error (use the list forms). ``a``/``f`` variants keep
  their suffix (``sm_90a``, ``90a``, ``9.0a+PTX``), except ``{capability}``.
* ``{gencode}`` alone as one element of a command list expands to several arguments
  (``-gencode``, ``arch=compute_90,code=[sm_90,compute_90]``, ...); inside a longer
  string or an environment value it becomes space-separated single words
  (``-gencode=arch=compute_90,code=[sm_90,compute_90]``) that nvcc accepts as well.
* ``{cmake_archs}``: a bare number means real + virtual in CMake, i.e. SASS and PTX.
* ``{torch_arch_list}``: ``+PTX`` on every entry, so each target also gets its PTX.
* ``{{name}}`` writes a literal ``{name}``; ``${...}`` (shell and CMake variables) and
  any other brace are left alone. An unknown ``{name}`` is a ConfigError.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from gate.config.values import clip
from gate.errors import ConfigError
from gate.rules.targets import Target, Variant

_TOKEN = re.compile(r"(\$\{)|\{\{(\w+)\}\}|\{(\w+)\}")
SINGLE = ("sm", "compute", "cc", "capability")
LISTS = ("gencode", "cmake_archs", "torch_arch_list")
TOOLS = ("nvcc", "python")
PLACEHOLDERS = SINGLE + LISTS + TOOLS


def gencode(sass: Sequence[Target], ptx: Sequence[Target]) -> list[str]:
    """``-gencode`` flags for SASS and PTX targets, grouped per virtual architecture.

    ``a``/``f`` variants are kept: ``sm_90a`` gives ``arch=compute_90a,code=[sm_90a,...]``.
    """
    by_arch: dict[str, list[str]] = {}
    for target in sass:
        by_arch.setdefault(str(target.as_ptx()), []).append(str(target.as_sass()))
    for target in ptx:
        by_arch.setdefault(str(target.as_ptx()), []).append(str(target.as_ptx()))
    flags: list[str] = []
    for arch, codes in by_arch.items():
        flags += ["-gencode", f"arch={arch},code=[{','.join(dict.fromkeys(codes))}]"]
    return flags


def _single(name: str, target: Target) -> str:
    sass = target.as_sass()
    values = {
        "sm": str(sass),
        "compute": str(target.as_ptx()),
        "cc": f"{sass.number}{sass.variant.value}",
        "capability": str(sass.capability),
    }
    return values[name]


def gencode_args(targets: Sequence[Target]) -> list[str]:
    """``-gencode`` flags asking for SASS and PTX of every target, as separate arguments."""
    return gencode([t.as_sass() for t in targets], [t.as_ptx() for t in targets])


def _list_value(name: str, targets: Sequence[Target]) -> str:
    sass = [t.as_sass() for t in targets]
    if name == "gencode":
        flags = gencode_args(targets)
        return " ".join(
            f"{flag}={value}" for flag, value in zip(flags[::2], flags[1::2], strict=True)
        )
    if name == "cmake_archs":
        return ";".join(f"{t.number}{t.variant.value}" for t in sass)
    family = [t for t in sass if t.variant is Variant.FAMILY]
    if family:
        # torch's TORCH_CUDA_ARCH_LIST takes plain and 'a' targets only (9.0, 9.0a).
        raise ConfigError(
            f"{{torch_arch_list}} cannot name the family-specific target {family[0]}: "
            "torch accepts plain and arch-specific ('a') targets only"
        )
    return ";".join(f"{t.major}.{t.minor}{t.variant.value}+PTX" for t in sass)


def names_in(text: str) -> Iterator[str]:
    """The placeholder names ``text`` uses (escaped ``{{name}}`` and ``${...}`` excluded)."""
    for match in _TOKEN.finditer(text):
        if match.group(3):
            yield match.group(3)


def check(text: str, where: str, allowed: Sequence[str] = PLACEHOLDERS) -> None:
    """Raise ConfigError naming ``where`` if ``text`` uses a placeholder not in ``allowed``."""
    for name in names_in(text):
        if name not in allowed:
            known = ", ".join(f"{{{p}}}" for p in allowed)
            if name in PLACEHOLDERS:
                raise ConfigError(f"{where}: placeholder {{{name}}} is not allowed here ({known})")
            raise ConfigError(f"{where}: unknown placeholder {{{clip(name)}}} (known: {known})")


def substitute(
    text: str,
    targets: Sequence[Target],
    *,
    where: str = "value",
    tools: Mapping[str, str] | None = None,
) -> str:
    """``text`` with every placeholder filled in for ``targets`` (the detected one first).

    ``tools`` maps ``nvcc`` and ``python`` to the programs the gate uses.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return match.group(1)
        if match.group(2):
            return "{" + match.group(2) + "}"
        name = match.group(3)
        if name not in PLACEHOLDERS:
            check(text, where)
        if name in TOOLS:
            found = (tools or {}).get(name)
            if found is None:
                raise ConfigError(f"{where}: {{{name}}} used, but the gate knows no {name} here")
            return found
        if not targets:
            raise ConfigError(f"{where}: {{{name}}} used, but no target is known")
        if name in LISTS:
            try:
                return _list_value(name, targets)
            except ConfigError as e:
                raise ConfigError(f"{where}: {e.message}") from e
        if len(targets) > 1:
            listed = ", ".join(str(t.as_sass()) for t in targets)
            raise ConfigError(
                f"{where}: {{{name}}} names one target but {len(targets)} are required "
                f"({listed}); use {{gencode}}, {{cmake_archs}} or {{torch_arch_list}}"
            )
        return _single(name, targets[0])

    return _TOKEN.sub(replace, text)


def substitute_argv(
    argv: Sequence[str],
    targets: Sequence[Target],
    *,
    where: str = "command",
    tools: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """A command with placeholders filled in; ``{gencode}`` alone expands to several arguments."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "{gencode}":
            out += gencode_args(targets)
        else:
            out.append(substitute(arg, targets, where=f"{where}[{index}]", tools=tools))
    return tuple(out)
