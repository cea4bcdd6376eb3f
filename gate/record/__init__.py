"""The run record: everything one gate run found, as frozen records, and its one JSON form.

``result.json`` (schema ``gate/schemas/result.schema.json``) is written from a
:class:`RunRecord` by :meth:`RunRecord.to_json` and read back only through
:meth:`RunRecord.from_json` / :func:`load`, which check the version and the shape.
Every reader (manifest, verify, store, matrix, GitHub reporting) uses these.

Its modules: :mod:`gate.record.parts` (what a run built, inspected, loaded and ran),
:mod:`gate.record.codec` (the one codec: records written and read back field by field),
:mod:`gate.record.shapes` (where each part's JSON differs from its fields),
:mod:`gate.record.document` (the whole record, its document's shape, and the reading of an
evidence folder's). Import from here.

Whether something passed is decided by the decision core (:mod:`gate.rules`) from the
record's own fields: an execution by :class:`gate.rules.causes.RunFacts`, the verdict by
:func:`gate.rules.verdict.decide`; a stored verdict that disagrees with them is not a
record.

Version history: 1 (first release); 2 adds each execution's expected exit status
and cache check (so "passed" can be recomputed instead of guessed from exit 0),
a ranked cause on each failing check, the stages and their status, and, for
loaded libraries, how the device runs them; 3 gives each check one ``state``
(passed, warned, failed, not-run) in place of the two flags ``passed`` and
``skipped``, which stages set differently, and the execution path it stands for,
and records each required target with its form (``requirements``) and what the run
did not do, with no check standing for it (``notes``: no cuobjdump to cross-check
with); 4 adds each entry's ``size`` (bytes of device code) and, for a run compared
with a baseline (``--baseline``), the comparison (``baseline``: gate.baseline.comparison); 5
adds the effective release policy (``policy``); 6 records the delivery image a run was
in (``environment.container``: how it ran there, ``runtime`` for ``--image`` or
``inside``, the reference, the manifest digest and where it came from, the image id,
platform, runtime and version, the GPUs passed), where 5 had only ``image`` and
``digest`` (read as an ``inside`` run whose digest came from the environment), and what
the launch recorder showed (``launches``: coverage per artifact and path, runtime
modules; gate.launch.summary), null without it; 7 names the kernel of each baseline
change about one (``baseline.changes[].kernel``: the symbol, where ``what`` reads it
demangled) and says a kernel lost from several targets as one change.
8 makes every clause of the headline and of each diagnosis checkable: the verdict's
``clauses`` and each diagnosis as ``{text, clauses}`` (before: its text alone, read with
no clauses), each clause ``{text, source, path, state, error, kernel}`` where ``source``
is a JSON pointer into the document (``/checks/4``, ``/executions/1``, ``/stages/2``,
``/artifacts/0/listing/entries/3``, ``/device/capability``) and the rest what the clause
says of that record; and each check's ``error``, the CUDA error code its failure quotes
(absent before: null).
Versions 1 and 2 are still read: a check they mark skipped reads as not run, so a
stored run is judged by today's rule (a check that did not run never counts as passed);
their stored verdict is not compared with it. Versions 1 to 3 read with every size 0
(unknown) and no baseline.
"""

from __future__ import annotations

from gate.record.document import (
    LOADED_LIST,
    MAX_RESULT_BYTES,
    READABLE_VERSIONS,
    RESULT_FILE,
    RESULT_VERSION,
    STAGES,
    RunRecord,
    load,
    parse,
    read_result,
)
from gate.record.parts import (
    Artifact,
    Build,
    CrossCheck,
    Device,
    Environment,
    Execution,
    LoadedLibrary,
    RunInfo,
)
from gate.record.shapes import listing_json

__all__ = [
    "LOADED_LIST",
    "MAX_RESULT_BYTES",
    "READABLE_VERSIONS",
    "RESULT_FILE",
    "RESULT_VERSION",
    "STAGES",
    "Artifact",
    "Build",
    "CrossCheck",
    "Device",
    "Environment",
    "Execution",
    "LoadedLibrary",
    "RunInfo",
    "RunRecord",
    "listing_json",
    "load",
    "parse",
    "read_result",
]
