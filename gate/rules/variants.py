"""Runtime-selected variants: several builds of one library of which a package loads one.

Some distributions ship one library several times and choose at run time: bitsandbytes
ships ``libbitsandbytes_cuda118.so`` ... ``libbitsandbytes_cuda132.so`` and loads the
one named for the CUDA runtime's ``major.minor`` (beside ``_cpu``, ``_rocm64``, ``_xpu``
builds for other backends); sgl-kernel ships ``sm90/`` and ``sm100/`` builds of one
extension and loads one per GPU. Read as if every file were required, the old builds
look like missing device code. Here they are read as alternatives.

The rules are data (:data:`RULES`): a pattern over a member's path inside its
distribution, what selects among the matches, and the sentence the output states.
Matches that share everything but the selecting part form one :class:`VariantSet`
when there are at least two selectable builds; which of them a CUDA runtime loads is
:meth:`VariantSet.loaded`. The environment audit answers a set by its best loadable
build (:func:`gate.rules.environment.set_part`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile

from gate.rules.targets import Version


class Selector(enum.Enum):
    """What chooses among the builds of one library at run time."""

    CUDA_RUNTIME = "CUDA runtime"
    GPU = "GPU"


@dataclass(frozen=True)
class VariantRule:
    """One naming convention for alternative builds, and how the package picks one.

    ``pattern`` has the groups ``head`` and ``tail`` (kept: they name the library) and
    ``key`` (the selecting part). ``other`` matches builds for other backends (CPU,
    ROCm, XPU) that join a set of this rule but are never loaded for a CUDA device.
    """

    name: str
    selector: Selector
    pattern: re.Pattern[str]
    other: re.Pattern[str] | None
    says: str  # the rule as the output states it
    source: str  # where the rule comes from


RULES: tuple[VariantRule, ...] = (
    VariantRule(
        name="cuda-runtime-suffix",
        selector=Selector.CUDA_RUNTIME,
        pattern=re.compile(r"^(?P<head>(?:.*/)?lib[^/]+?_)cuda(?P<key>\d{2,3})(?P<tail>\.so)$"),
        other=re.compile(
            r"^(?P<head>(?:.*/)?lib[^/]+?_)(?P<key>cpu|rocm\d*|hip\d*|xpu\d*|mps)"
            r"(?P<tail>\.so)$"
        ),
        says="loaded by CUDA runtime: the build named for its major.minor",
        source="bitsandbytes cextension.py: libbitsandbytes_cuda{major}{minor}.so "
        "from torch.version.cuda (BNB_CUDA_VERSION overrides)",
    ),
    VariantRule(
        name="gpu-folder",
        selector=Selector.GPU,
        pattern=re.compile(r"^(?P<head>(?:.*/)?)sm(?P<key>\d{2,3}[af]?)/(?P<tail>.+)$"),
        other=None,
        says="loaded by GPU: the package picks one build per device",
        source="sgl-kernel: sm90/ and sm100/ builds of one extension, chosen at import",
    ),
)


@dataclass(frozen=True)
class Variant:
    """One build in a set: its path in the distribution and its selecting key."""

    path: str
    key: str  # "128" for _cuda128, "100" for sm100/, "cpu" for another backend
    selector: Selector
    other_backend: bool = False

    @property
    def runtime(self) -> Version | None:
        """The CUDA runtime ``major.minor`` a ``_cudaXYZ`` build is named for."""
        if self.selector is not Selector.CUDA_RUNTIME or self.other_backend:
            return None
        return Version(int(self.key[:-1]), int(self.key[-1]))

    @property
    def label(self) -> str:
        """How the output names this build: ``cuda128``, ``sm100``, ``cpu``."""
        return self.key if self.other_backend else f"{_PREFIX[self.selector]}{self.key}"


_PREFIX = {Selector.CUDA_RUNTIME: "cuda", Selector.GPU: "sm"}


@dataclass(frozen=True)
class VariantSet:
    """Builds of one library of which the package loads one, by ``rule``."""

    rule: VariantRule
    family: str  # the library with the selecting part as ``*``: lib/libx_cuda*.so
    variants: tuple[Variant, ...]

    @property
    def selectable(self) -> tuple[Variant, ...]:
        """The builds a CUDA device can get (not the other backends)."""
        return tuple(v for v in self.variants if not v.other_backend)

    def loaded(self, runtime: Version | None) -> tuple[Variant, ...]:
        """The builds that may be loaded: for a known CUDA runtime and a runtime rule, the
        one named for its ``major.minor`` (none when it ships none); else every build."""
        if runtime is None or self.rule.selector is not Selector.CUDA_RUNTIME:
            return self.selectable
        return tuple(v for v in self.selectable if v.runtime == runtime)


def _natural(v: Variant) -> tuple[bool, int, str]:
    """Builds in the order of their numbers (``sm90`` before ``sm100``), other backends last."""
    digits = "".join(takewhile(str.isdigit, v.key))
    return (v.other_backend, int(digits or "0"), v.key)


def find_sets(paths: Sequence[str]) -> tuple[VariantSet, ...]:
    """The sets of alternative builds among ``paths`` (members of one distribution)."""
    sets = []
    taken: set[str] = set()
    for rule in RULES:
        found: dict[tuple[str, str], list[Variant]] = {}
        for path in paths:
            if path in taken:
                continue
            m = rule.pattern.match(path)
            other = False
            if m is None and rule.other is not None:
                m, other = rule.other.match(path), True
            if m is None:
                continue
            variant = Variant(path, m.group("key"), rule.selector, other)
            found.setdefault((m.group("head"), m.group("tail")), []).append(variant)
        for (head, tail), variants in found.items():
            if len({v.key for v in variants if not v.other_backend}) < 2:
                continue
            sep = "/" if rule.selector is Selector.GPU else ""
            ordered = tuple(sorted(variants, key=_natural))
            sets.append(VariantSet(rule, f"{head}{_PREFIX[rule.selector]}*{sep}{tail}", ordered))
            taken.update(v.path for v in variants)
    return tuple(sets)
