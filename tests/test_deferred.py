"""The full SASS dumps left running beside the execute stage: always joined, never lost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ToolError
from gate.evidence import EvidenceDir
from gate.stages.sassdump import Deferred

pytestmark = pytest.mark.unit


def _dump(text: str) -> proc.Result:
    return proc.Result(("cuobjdump", "--dump-sass", "x"), 0, text, "", 0.1)


def test_every_dump_is_written_and_checked_whatever_another_one_did(tmp_path: Path) -> None:
    evidence = EvidenceDir.create(tmp_path / "ev")
    started = threading.Event()

    def broken() -> proc.Result | ToolError:
        started.set()
        raise RuntimeError("a bug in the dump")

    deferred = Deferred()
    deferred.submit(broken, evidence, "a.so", "artifacts/a.so/", checked=True)
    deferred.submit(lambda: ToolError("nvdisasm not found"), evidence, "b.so", "b/", checked=True)
    deferred.submit(
        lambda: _dump("\tFunction : _Z1kv\n"), evidence, "c.so", "artifacts/c.so/", checked=True
    )
    deferred.submit(lambda: _dump("no code\n"), evidence, "app", "artifacts/app/", checked=False)
    checks = deferred.finish()  # never raises
    assert started.is_set()
    by_name = {c.name: c for c in checks}
    assert not by_name["a.so: SASS dump"].ok
    assert "internal error: RuntimeError: a bug in the dump" in by_name["a.so: SASS dump"].message
    assert "nvdisasm not found" in (tmp_path / "ev/b/sass-not-dumped.txt").read_text("utf-8")
    assert by_name["c.so: SASS dump holds SASS"].ok
    assert (tmp_path / "ev/artifacts/app/sass.txt").read_text("utf-8") == "no code\n"
    assert "app: SASS dump holds SASS" not in by_name  # no device code of its own: no check
    assert deferred.finish() == []  # joined once; nothing left running
