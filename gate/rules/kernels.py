"""Which kernel a required name means: never a substring, always a whole name.

A required kernel is written one of four ways, and matched against each kernel's
symbol (the mangled name in the binary) by the part of its C++ name it spells:

* a mangled name (``_Z5scalePf``): that symbol exactly;
* a plain name (``scale``): the function's own name, without namespaces, template
  arguments and parameters (``ns::scale<float>(float*)`` is ``scale``;
  ``scale_f32_fast1`` is not, although its mangled name holds ``5scale``);
* a qualified name (``ns::scale``, a leading ``::`` for the global namespace): the
  namespaces and classes too, still without template arguments and parameters;
* a name with template arguments (``scale<float>``, ``ns::scale<float>``): the name
  with its arguments, spaces ignored.

Names come from the C++ runtime's demangler (:mod:`gate.demangle`); ``extern "C"``
kernels are their own names. Where the demangler is missing, a mangled symbol whose
name is simple (``_Z5scalePf``, ``_ZN2ns5scaleEPf``) is still read; any other is
matched by its mangled name only.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from gate.demangle import demangle

_OPEN = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_SOURCE_NAME = re.compile(r"([1-9][0-9]{0,3})")


@dataclass(frozen=True)
class KernelName:
    """A kernel's symbol and the parts of its C++ name a requirement can spell."""

    symbol: str
    shown: str  # the demangled name, or the symbol when it cannot be demangled
    function: str | None  # scale
    qualified: str | None  # ns::scale
    function_args: str | None  # scale<float>
    qualified_args: str | None  # ns::scale<float>

    def spelled(self, wanted: str) -> str | None:
        """The part of this name that a requirement written like ``wanted`` compares with."""
        if wanted.startswith("_Z"):
            return self.symbol
        with_args = "<" in wanted
        if "::" in wanted:
            return self.qualified_args if with_args else self.qualified
        return self.function_args if with_args else self.function


def parse(symbol: str) -> KernelName:
    """The parts of ``symbol``'s C++ name (cached: symbols repeat across targets)."""
    return _parse_cached(symbol)


def _parse(symbol: str) -> KernelName:
    shown = demangle(symbol)
    if shown == symbol and symbol.startswith("_Z"):
        simple = _simple_mangled(symbol)
        if simple is None:
            return KernelName(symbol, symbol, None, None, None, None)
        shown = simple
    # ``(anonymous namespace)`` and ``operator()`` are the two names holding parentheses:
    # they are read as if in braces, like a lambda's ``{lambda()#1}``.
    qualified_args = _name_of(_mask(shown))
    parts = _split(qualified_args, "::")
    bare = [_without_args(p) for p in parts]
    return KernelName(
        symbol=symbol,
        shown=shown,
        function=_unmask(bare[-1]),
        qualified=_unmask("::".join(bare)),
        function_args=_unmask(parts[-1]),
        qualified_args=_unmask(qualified_args),
    )


_parse_cached = functools.lru_cache(maxsize=1 << 16)(_parse)


def clear_cache() -> None:
    """Forget every parsed name (tests/conftest.py: each test parses the names it uses)."""
    _parse_cached.cache_clear()


def matches(wanted: str, symbol: str) -> bool:
    """Whether the requirement ``wanted`` names the kernel ``symbol`` (see the module doc)."""
    want = _normal(wanted)
    if not want:
        return False
    spelled = parse(symbol).spelled(want)
    if spelled is None:
        return False
    return _normal(spelled) == want.removeprefix("::")


def matching(wanted: str, symbols: Iterable[str]) -> tuple[str, ...]:
    """Every symbol among ``symbols`` that ``wanted`` names, sorted, each once."""
    return tuple(sorted({s for s in symbols if matches(wanted, s)}))


def readable(symbols: Iterable[str], *, short: bool = False) -> dict[str, str]:
    """Each of ``symbols`` by the name a person reads: the one place that says it.

    The demangled name (``scale(float*, int)``; an ``extern "C"`` kernel, or a name that
    cannot be demangled, as it is); where two of ``symbols`` would read alike (the same
    C++ name of two symbols; ``scale`` for both overloads where the demangler is
    missing), each is followed by its symbol: ``scale [_Z5scalePfi]``. With ``short``,
    the function's own name (``scale``, ``silu<float>``) where that tells it from the
    others, else the whole name as above.
    """
    unique = tuple(dict.fromkeys(symbols))
    whole = _told_apart({s: parse(s).shown for s in unique}, bracket=True)
    if not short:
        return whole
    brief = _told_apart({s: parse(s).function_args or s for s in unique}, bracket=False)
    return {s: brief.get(s, whole[s]) for s in unique}


def readable_name(symbol: str) -> str:
    """One kernel by the name a person reads (alone, it reads like no other)."""
    return parse(symbol).shown


def _told_apart(shown: dict[str, str], *, bracket: bool) -> dict[str, str]:
    """``shown`` where no two read alike; those that do get `` [symbol]`` (``bracket``) or
    are left out for the caller to name otherwise."""
    times = Counter(shown.values())
    told: dict[str, str] = {}
    for symbol, name in shown.items():
        if times[name] == 1 or name == symbol:
            told[symbol] = name
        elif bracket:
            told[symbol] = f"{name} [{symbol}]"
    return told


def describe(symbols: tuple[str, ...]) -> str:
    """The kernels a requirement matched, as the report names them."""
    names = readable(symbols)
    shown = [names[s] for s in symbols[:3]]
    more = f" and {len(symbols) - 3} more" if len(symbols) > 3 else ""
    return ", ".join(shown) + more


def _normal(text: str) -> str:
    """Spaces do not matter: ``Outer<int, 4>`` is ``Outer<int,4>``."""
    return "".join(text.split())


def _name_of(shown: str) -> str:
    """``void ns::k<float>(float*) const`` -> ``ns::k<float>``: no return type, no parameters."""
    return _split(_before_parameters(shown).strip(), " ")[-1]


_MASKS = (("(anonymous namespace)", "{anonymous namespace}"), ("operator()", "operator{}"))


def _mask(text: str) -> str:
    for name, mask in _MASKS:
        text = text.replace(name, mask)
    return text


def _unmask(text: str) -> str:
    for name, mask in _MASKS:
        text = text.replace(mask, name)
    return text


def _levels(text: str) -> list[int]:
    """The bracket depth in front of each character of ``text`` (a closing one closes only
    the bracket it matches)."""
    levels: list[int] = []
    depth: list[str] = []
    for c in text:
        levels.append(len(depth))
        if c in _OPEN:
            depth.append(c)
        elif depth and _CLOSE.get(c) == depth[-1]:
            depth.pop()
    return levels


def _before_parameters(text: str) -> str:
    """``text`` up to its parameter list (the first top-level ``(``), else all of it."""
    levels = _levels(text)
    return next((text[:i] for i, c in enumerate(text) if c == "(" and not levels[i]), text)


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside brackets, left to right; empty parts dropped."""
    levels = _levels(text)
    parts: list[str] = []
    start = i = 0
    while i < len(text):
        if not levels[i] and text.startswith(sep, i):
            parts.append(text[start:i])
            i = start = i + len(sep)
        else:
            i += 1
    parts.append(text[start:])
    return [p for p in parts if p] or [text]


def _without_args(part: str) -> str:
    """``Outer<int, 4>`` -> ``Outer``: every top-level ``<...>`` removed."""
    out: list[str] = []
    depth = 0
    for c in part:
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(c)
    return "".join(out)


def _simple_mangled(symbol: str) -> str | None:
    """``_Z5scalePf`` -> ``scale``, ``_ZN2ns5scaleEPf`` -> ``ns::scale``, without a demangler;
    None for anything less simple (templates, substitutions, special names)."""
    nested = symbol.startswith("_ZN")
    rest = symbol[3:] if nested else symbol[2:]
    names: list[str] = []
    while True:
        match = _SOURCE_NAME.match(rest)
        if match is None:
            break
        length = int(match.group(1))
        name = rest[match.end() : match.end() + length]
        if len(name) < length or not name.isidentifier():
            return None
        names.append(name)
        rest = rest[match.end() + length :]
        if not nested:
            break
    if not names or (nested and not rest.startswith("E")) or rest[:1] == "I":
        return None
    return "::".join(names)
