"""The build stage for bytes built elsewhere (``cuda-gate run --prebuilt SHA256SUMS``).

A release builds its artifacts once, on a build machine, and gates those very bytes on
every runner class. Here the project's build commands are not run; instead, in order:

1. every file ``SHA256SUMS`` lists is read and must have its listed SHA-256
   (gate.scan.checksums; the CLI checked this once before anything ran, this is the
   record of it);
2. the configured artifacts (``[[artifact]]`` globs) must be exactly the listed files:
   an artifact the list lacks did not come from the build, and a listed file no
   artifact names would be published without being gated;

then ``prebuilt.json`` (schema ``gate/schemas/prebuilt.schema.json``) records in the
evidence that the bytes came from outside, with the list's own digest, every file's
digest and size, and the build commands that were not run. The inspect stage hashes
the same files again, and the manifest again before it is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.config import Config, resolve_artifact_specs
from gate.errors import BadInputError, GateError
from gate.evidence import EvidenceDir
from gate.reader.artifacts import shown
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState
from gate.scan.checksums import Checksums, Verified

PREBUILT_FILE = "prebuilt.json"
PREBUILT_VERSION = 1
CHECK_NAME = "build prebuilt"


@dataclass(frozen=True)
class PrebuiltOutcome:
    """The one check on the prebuilt files, and the failure that stops the run, if any."""

    check: Check
    failure: GateError | None = None


def run(evidence: EvidenceDir, config: Config, prebuilt: Checksums) -> PrebuiltOutcome:
    """Check the prebuilt files (see the module docstring) and record where they came from."""
    not_run = tuple(step.name for step in config.builds)
    try:
        # 1. The bytes are the listed ones.
        verified = prebuilt.verify()
        # 2. They are the configured artifacts, no more and no fewer.
        _same_files(config, prebuilt)
    except GateError as e:
        return PrebuiltOutcome(_failed(e), e)
    evidence.write_json(PREBUILT_FILE, _document(prebuilt, verified, not_run))
    skipped = f"; build commands not run: {', '.join(not_run)}" if not_run else ""
    message = (
        f"{len(verified)} file(s) built elsewhere match {shown(prebuilt.source)} "
        f"(sha256 {prebuilt.sha256[:16]}...){skipped}"
    )
    return PrebuiltOutcome(Check(CHECK_NAME, "gate.build", CheckState.PASSED, message))


def _same_files(config: Config, prebuilt: Checksums) -> None:
    """The artifact globs match exactly the listed files; BadInputError for the first odd one."""
    listed = prebuilt.by_path()
    configured = {a.path: a for a in resolve_artifact_specs(config)}
    for path, artifact in configured.items():
        if path not in listed:
            raise BadInputError(
                f"{artifact.key}.path: {shown(path)} is an artifact, but {prebuilt.source} "
                "does not list it: it was not built by the build that wrote the list"
            )
    for path, file in listed.items():
        if path not in configured:
            raise BadInputError(
                f"{prebuilt.source}: {file.name} is listed, but no [[artifact]] names it: "
                "it would be published without being gated"
            )


def _failed(error: GateError) -> Check:
    return Check(
        CHECK_NAME, "gate.build", CheckState.FAILED, error.one_line(), cause=Cause.TOOLCHAIN
    )


def _document(
    prebuilt: Checksums, verified: tuple[Verified, ...], not_run: tuple[str, ...]
) -> dict[str, object]:
    return {
        "version": PREBUILT_VERSION,
        "sha256sums": {"path": shown(prebuilt.source.resolve()), "sha256": prebuilt.sha256},
        "files": [
            {
                "name": v.listed.name,
                "path": shown(v.listed.path),
                "sha256": v.listed.sha256,
                "size": v.size,
            }
            for v in verified
        ],
        "build_commands_not_run": list(not_run),
    }
