"""The package's layers, enforced from its imports: lower layers never import higher ones.

A module may import modules of a lower layer, and modules of its own part (the same
subpackage); never a higher layer, and never another part of the same layer (attest
and store do not know each other). Imports inside functions and under TYPE_CHECKING
count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gate"

# (module prefix, layer); the longest matching prefix decides.
LAYERS = (
    ("gate", 0),  # gate/__init__.py: the version only
    ("gate.errors", 0),
    ("gate.demangle", 1),
    ("gate.lazy", 1),  # package names imported on first use (gate.store, gate.config)
    ("gate.rules", 2),  # the decision core: below everything that decides
    ("gate.reader", 3),
    ("gate.fsutil", 3),
    ("gate.guard.redact", 3),
    ("gate.jsonutil", 3),
    ("gate.pump", 3),
    ("gate.proc", 4),
    ("gate.scan", 4),  # the engine over the reader: walks, caches, pools, process settings
    ("gate.guard.vault", 4),
    ("gate.guard.selfcheck", 4),  # the gate runs only the code it started with
    ("gate.guard.watchdog", 3),  # ends what a killed gate left running (a process of its own)
    ("gate.config", 5),
    ("gate.system.git", 5),
    ("gate.system.ci", 5),
    ("gate.system.machine", 5),
    ("gate.tools.buildcache", 5),
    ("gate.evidence", 5),
    ("gate.tools.programs", 4),  # the gate's own CUDA sources and their build timeout
    # The launch recorder, end to end; below the stages that run and judge with it.
    ("gate.launch", 4),  # its record decoded (log), what the run record keeps (summary)
    ("gate.launch.routes", 5),  # which code ran a launched kernel: driver or loaded module
    ("gate.launch.recorder", 6),  # the CUPTI injection library, built like the probe
    ("gate.launch.coverage", 6),  # the coverage, runtime-module and recorded-route checks
    ("gate.tools.cuobjdump", 5),
    ("gate.image", 5),  # container images: reads with gate.reader, saves through gate.proc
    ("gate.container", 5),  # the container runtime, the image it resolves, commands in it
    ("gate.record", 6),
    ("gate.audit", 6),  # an audit's answers: each artifact and distribution per device
    ("gate.render", 7),
    ("gate.render.wording", 3),  # the phrases (counts, kernels, routes): images, audits say them
    ("gate.attest", 8),
    ("gate.store", 9),
    ("gate.github", 10),
    ("gate.baseline.comparison", 5),  # a run compared with a baseline: facts and JSON, no IO
    ("gate.baseline", 10),  # finds a baseline run (a folder or the store) and compares
    ("gate.stages", 11),
    ("gate.pipeline", 12),
    ("gate.commands", 13),
    ("gate.cli", 13),
    ("gate.__main__", 14),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> tuple[str, int]:
    """The part (matching prefix) and layer of a module."""
    matches = [(p, n) for p, n in LAYERS if module == p or module.startswith(p + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return max(matches, key=lambda m: len(m[0]))


@cache
def imports() -> dict[str, set[str]]:
    """Every gate module and the gate modules it imports (anywhere in the file)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("gate")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                targets |= _from_import(node)
        found[name] = targets
    return found


def _from_import(node: ast.ImportFrom) -> set[str]:
    """``from gate.stages import execute`` imports the module gate.stages.execute."""
    if node.module is None or not node.module.startswith("gate"):
        return set()
    found = set()
    for alias in node.names:
        candidate = f"{node.module}.{alias.name}"
        folder = PACKAGE.parent / candidate.replace(".", "/")
        is_module = folder.with_suffix(".py").exists() or folder.is_dir()
        found.add(candidate if is_module else node.module)
    return found


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes up a layer or sideways into another part."""
    out = []
    for source, targets in graph.items():
        part, rank = layer(source)
        for target in targets:
            if target == "gate":
                continue
            other, other_rank = layer(target)
            if other == part or other_rank < rank:
                continue
            out.append(f"{source} (layer {rank}) imports {target} (layer {other_rank})")
    return sorted(out)


def test_no_module_imports_a_higher_layer_or_another_part_of_its_own() -> None:
    assert violations(imports()) == []


def test_the_rule_catches_a_lower_layer_importing_a_higher_one() -> None:
    graph = {
        "gate.reader.fatbin": {"gate.stages.inspect"},
        "gate.attest.verify": {"gate.store.s3"},
        "gate.render.text": {"gate.config.values"},
        "gate.store.s3": {"gate.store.base"},
        "gate.system.git": {"gate.system.machine"},
    }
    assert violations(graph) == [
        "gate.attest.verify (layer 8) imports gate.store.s3 (layer 9)",
        "gate.reader.fatbin (layer 3) imports gate.stages.inspect (layer 11)",
        "gate.system.git (layer 5) imports gate.system.machine (layer 5)",
    ]


def closure(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [t for t in graph.get(name, ()) if t in graph]
    return seen


def test_inspect_needs_no_stage_and_no_pipeline() -> None:
    reached = closure("gate.commands.inspect", imports())
    assert not {m for m in reached if m.startswith(("gate.stages", "gate.pipeline"))}
    assert not {m for m in reached if m.startswith(("gate.store", "gate.attest"))}


def test_the_reader_imports_nothing_but_itself_the_rules_and_errors() -> None:
    graph = imports()
    for module in (m for m in graph if m.startswith("gate.reader")):
        outside = {
            t
            for t in graph[module]
            if not t.startswith(("gate.reader", "gate.rules", "gate.errors"))
        }
        assert outside <= {"gate"}, f"{module} imports {outside}"


def test_the_decision_core_imports_nothing_but_itself_errors_and_the_demangler() -> None:
    graph = imports()
    core = [m for m in graph if m.startswith("gate.rules")]
    assert "gate.rules.verdict" in core
    for module in core:
        outside = {
            t
            for t in graph[module]
            if not t.startswith(("gate.rules", "gate.errors", "gate.demangle"))
        }
        assert outside <= {"gate"}, f"{module} imports {outside}"


def cycles(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    """Every import cycle among the modules under ``prefix`` (each as a path, once)."""
    nodes = sorted(m for m in graph if m.startswith(prefix))
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def visit(path: list[str]) -> None:
        for target in sorted(graph.get(path[-1], ())):
            if not target.startswith(prefix):
                continue
            if target == path[0]:
                key = frozenset(path)
                if key not in seen:
                    seen.add(key)
                    found.append([*path, target])
            elif target not in path and target > path[0]:
                visit([*path, target])

    for node in nodes:
        visit([node])
    return found


def test_no_two_stages_import_each_other_even_for_type_checking() -> None:
    assert cycles(imports(), "gate.stages") == []


def strongly_connected(graph: dict[str, set[str]], nodes: set[str]) -> list[list[str]]:
    """The strongly-connected components of ``graph`` restricted to ``nodes``, each sorted
    (Tarjan's algorithm, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, set()) & nodes)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(sorted(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph.get(target, set()) & nodes))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return found


def import_cycles(graph: dict[str, set[str]], prefixes: tuple[str, ...]) -> list[list[str]]:
    """One circle of imports (``a -> b -> a``) through each group of modules under
    ``prefixes`` that reach each other, by any import (inside functions and under
    TYPE_CHECKING too)."""
    nodes = {m for m in graph if m.startswith(prefixes)}
    return [_circle(graph, c) for c in strongly_connected(graph, nodes) if len(c) > 1]


def _circle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A path from the component's first module back to it, inside the component."""
    start, inside = component[0], set(component)
    before: dict[str, str] = {}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for target in sorted(graph.get(node, set()) & inside):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(before[path[-1]])
                return [*reversed(path), start]
            if target not in before:
                before[target] = node
                todo.append(target)
    raise AssertionError(f"{component} is no circle")


def test_no_import_cycle_in_reader_or_scan() -> None:
    found = import_cycles(imports(), ("gate.reader", "gate.scan"))
    assert found == [], "imports in a circle: " + "; ".join(" -> ".join(c) for c in found)


def test_no_import_cycle_anywhere_in_the_gate() -> None:
    # A package's __init__ counts as a module: re-exports that import back are circles too.
    found = import_cycles(imports(), ("gate",))
    assert found == [], "imports in a circle: " + "; ".join(" -> ".join(c) for c in found)


def test_the_cycle_check_names_a_circle_made_by_a_function_level_import() -> None:
    graph = {
        "gate.reader.read": {"gate.scan.parallel", "gate.reader.fatbin"},
        "gate.scan.parallel": {"gate.scan.cache"},
        "gate.scan.cache": {"gate.reader.read"},
        "gate.reader.fatbin": set(),
        "gate.scan.walk": {"gate.scan.parallel"},
        "gate.stages.inspect": {"gate.scan.walk"},
    }
    assert import_cycles(graph, ("gate.reader", "gate.scan")) == [
        ["gate.reader.read", "gate.scan.parallel", "gate.scan.cache", "gate.reader.read"]
    ]
    assert import_cycles({"gate.scan.a": {"gate.scan.b"}, "gate.scan.b": set()}, ("gate",)) == []


def test_configuration_does_not_pull_in_the_stages() -> None:
    reached = closure("gate.config", imports())
    assert not {m for m in reached if m.startswith("gate.stages")}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_only_its_callers_import_the_launch_recorder() -> None:
    # The stages that build, run and judge with it, the pipeline that starts its build, and
    # the records that keep its summary; nothing else reaches into gate/launch/.
    callers = (
        "gate.launch",
        "gate.stages.execute",
        "gate.stages.runs",
        "gate.stages.policycheck",
        "gate.pipeline",
        "gate.record",
        "gate.attest",
    )
    outside = sorted(
        f"{source} imports {target}"
        for source, targets in imports().items()
        if not _within(source, callers)
        for target in targets
        if _within(target, ("gate.launch",))
    )
    assert outside == []
