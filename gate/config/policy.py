"""``[policy]``: the release policy table, read into :class:`gate.rules.policy.ReleasePolicy`.

Fails closed: an unknown key, a value of the wrong type or a word not in a key's list is
one ConfigError line naming the file and the key, such as
``cuda-gate.toml: policy.surplus_targets: expected one of "allow", "warn", "fail", got
"maybe"``. ``[policy.baseline]`` takes the keys and values of ``[baseline]``, which
still works on its own; both at once is an error (one place says it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.config import values as tv
from gate.errors import ConfigError
from gate.rules.baseline import Policy, Rule
from gate.rules.policy import ACTIONS, KEYS, Action, ReleasePolicy
from gate.rules.targets import Capability, parse_target_or_capability

BASELINE_KEYS = frozenset(r.value for r in Rule)
_SEVERITIES = ("fail", "warn")


def read(doc: Mapping[str, Any], root: tv.At) -> ReleasePolicy:
    """The ``policy`` table of ``doc`` (and its ``baseline`` alias), or the defaults."""
    table = tv.table(doc.get("policy", {}), root.child("policy"))
    at = root.child("policy")
    tv.check_keys(table, frozenset(KEYS), at)
    if "baseline" in table and "baseline" in doc:
        raise at.child("baseline").fail(
            f"given twice: as [{root.child('baseline').key}] and as [{at.child('baseline').key}]; "
            "keep one"
        )
    if "baseline" in table:
        baseline = read_baseline(table["baseline"], at.child("baseline"))
    else:
        baseline = read_baseline(doc.get("baseline", {}), root.child("baseline"))
    actions = {
        key: _action(table[key], at.child(key), allowed)
        for key, allowed in ACTIONS.items()
        if key in table
    }
    return ReleasePolicy(
        **actions,
        ptx_as_device_code=tv.flag(
            table.get("ptx_as_device_code", False), at.child("ptx_as_device_code")
        ),
        required_devices=_devices(table.get("required_devices", {}), at.child("required_devices")),
        baseline=baseline,
    )


def read_baseline(value: object, at: tv.At) -> Policy:
    """``[baseline]``: each rule of gate.rules.baseline, ``"fail"`` or ``"warn"``."""
    table = tv.table(value, at)
    tv.check_keys(table, BASELINE_KEYS, at)
    chosen = {key: _severity(item, at.child(key)) for key, item in table.items()}
    return Policy.from_mapping(chosen, str(at))


def _severity(value: object, at: tv.At) -> str:
    """``"fail"`` or ``"warn"``, in the words ``[baseline]`` always refused others with."""
    text = tv.text(value, at)
    if text not in _SEVERITIES:
        raise at.fail(f"{tv.quote(text)}: expected one of {', '.join(_SEVERITIES)}")
    return text


def _action(value: object, at: tv.At, allowed: tuple[Action, ...]) -> Action:
    return Action(_word(value, at, tuple(a.value for a in allowed)))


def _word(value: object, at: tv.At, allowed: tuple[str, ...]) -> str:
    """One of ``allowed`` (a string; anything else is named with what it is)."""
    words = ", ".join(f'"{w}"' for w in allowed)
    if not isinstance(value, str):
        raise at.fail(f"expected one of {words}, got {tv.show(value)}")
    if value not in allowed:
        shown = tv.clip(value).replace('"', '\\"')
        raise at.fail(f'expected one of {words}, got "{shown}"')
    return value


def _devices(value: object, at: tv.At) -> tuple[tuple[str, tuple[Capability, ...]], ...]:
    """``{ class = ["12.1", ...] }``: each runner class's required capabilities, once each."""
    found = []
    for name, caps in tv.table(value, at).items():
        where = at.child(tv.bounded(name, at, tv.MAX_NAME))
        if not name.strip():
            raise where.fail("a runner class name is empty")
        texts = tv.texts(caps, where)
        if not texts:
            raise where.fail("expected at least one capability (like 12.1)")
        parsed = []
        for i, text in enumerate(texts):
            try:
                parsed.append(parse_target_or_capability(text))
            except ConfigError as e:
                raise where.child(i).fail(e.message) from e
        found.append((name, tuple(dict.fromkeys(parsed))))
    return tuple(found)
