"""The signed predicate (``manifest.json``'s ``gate-run`` predicate): made from the run
record, and read into frozen records.

The gate writes it through :func:`predicate_of`, a projection of the run record
(:class:`gate.record.RunRecord`, as result.json holds it): the fields it keeps of each part,
named once here, and the digest of every evidence file. ``cuda-gate sign`` derives it
again the same way and compares.

``verify``, the release ``matrix`` and the GitHub attestation trust what a signed
predicate says; each reads it here, once, through :func:`read`: the schema
(``gate/schemas/manifest-predicate.schema.json``) first, then typed records. Its runs
are the run record's :class:`gate.record.Execution` and its checks the decision
core's :class:`gate.rules.verdict.Check`, so a signed run passed or failed by the very
rule the gate applied (gate.rules.causes); a predicate whose stored ``passed``
disagrees with its own fields is refused.

Version history: 1 (first release); 2 gives each check one ``state`` (passed, warned,
failed, not-run) in place of ``passed`` and ``skipped``, and each run the CUDA
runtime failure it printed; 3 adds ``baseline``: the run the device code was compared
with (``--baseline``), named by its result.json's SHA-256, and what was lost against
it; 4 gives ``environment.container`` its shape (the run record's, version 6), makes
the delivery image, where its digest is known, a subject of the Statement beside the
artifacts (:attr:`GatePredicate.image`), and adds ``launches``: what the launch recorder
showed (kernels launched per artifact and path, with the code that ran each; runtime
modules), as result.json version 6 holds it; 5 keeps each baseline change's ``kernel``
(the symbol; result.json version 7). Versions 1 to 4 are still read: a check
version 1 marks skipped reads as not run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from gate.errors import BadInputError
from gate.fsutil import FileDigest
from gate.launch.summary import Launches
from gate.record import Execution, RunRecord
from gate.rules.causes import Cause, ExecPath, RuntimeFailure
from gate.rules.verdict import Check, CheckState

PREDICATE_TYPE = "https://cuda-gate.dev/attestation/gate-run/v1"
PREDICATE_VERSION = 5


@dataclass(frozen=True)
class SignedArtifact:
    """A final artifact as signed: its name, where it was, its digest and size."""

    name: str
    path: str | None
    sha256: str
    size: int | None


@dataclass(frozen=True)
class SignedMachine:
    """The machine the run happened on, as signed (what verify compares with this one)."""

    host_arch: str | None
    driver_version: str | None
    driver_cuda_version: str | None
    toolkit_version: str | None
    toolkit_release: str | None
    capability: str | None


@dataclass(frozen=True)
class SignedVerdict:
    """The verdict as signed."""

    accepted: bool
    statement: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class SignedImage:
    """The delivery image as signed: what named it, and the subject that pins it."""

    reference: str
    mode: str  # "runtime" (run --image) or "inside" (the gate ran in it)
    subject: str | None  # the Statement's subject name for it (None: no digest known)
    digest: str | None  # "sha256:<hex>"
    runtime: str | None


@dataclass(frozen=True)
class GatePredicate:
    """Everything a signed gate-run predicate says that its readers use."""

    version: int
    tool_version: str
    run_id: str | None
    runner: str | None
    runner_class: str | None
    finished: str | None
    revision: str | None
    dirty: bool | None
    repository: str | None
    machine: SignedMachine
    artifacts: tuple[SignedArtifact, ...]
    executions: tuple[Execution, ...]
    checks: tuple[Check, ...]
    verdict: SignedVerdict
    evidence: tuple[FileDigest, ...]  # each evidence file: its path in the folder, digest, size
    image: SignedImage | None = None
    launches: Launches | None = None  # version 4; None where nothing was recorded

    @property
    def signed_class(self) -> str | None:
        """The runner class the run was recorded for (its runner where it names none)."""
        return self.runner_class or self.runner


# What the predicate keeps of each part of the run record (extra keys in the record are
# not signed over; a key added here must be added to the schema too).
_BUILD = ("name", "command", "argv", "cwd", "returncode", "duration")
_ARTIFACT = ("name", "host_format", "elf_machine", "listing")
_PROVENANCE = ("name", "path", "sha256", "size", "dependencies")
_DEPENDENCY = ("name", "resolved")
_EXECUTION = (
    "entry_point",
    "path",
    "command",
    "returncode",
    "expected_returncode",
    "timed_out",
    "duration",
    "log",
    "log_sha256",
    "output_ok",
    "cache_clean",
    "passed",
    "failure",
)
_CHECK = ("name", "classname", "state", "message", "cause", "path")
_VERDICT = ("accepted", "statement", "reasons")
_BASELINE = (
    "reference",
    "location",
    "result_sha256",
    "revision",
    "runner",
    "run_id",
    "regressions",
    "warnings",
)


def predicate_of(record: RunRecord, evidence: Sequence[FileDigest]) -> dict[str, Any]:
    """The signed predicate of ``record``: a projection of its JSON (result.json, without
    the loaded libraries' listings) onto the seed's four evidence sets, the verdict, the
    baseline, the launches and the evidence files' digests. Not validated here."""
    data = record.to_json(loaded_listings=False)
    env = data["environment"]
    return {
        "version": PREDICATE_VERSION,
        "tool": data["tool"],
        "run": {**data["run"], "started": data["started"], "finished": data["finished"]},
        "environment": {
            **_pick(env, "host_arch", "os", "supported_targets", "container"),
            "driver": env["driver"],
            "toolkit": env["toolkit"],
            "builds": [_pick(b, *_BUILD) for b in data["builds"]],
        },
        "device_code": {
            "device": data["device"],
            "artifacts": [_pick(a, *_ARTIFACT) for a in data["artifacts"]],
        },
        "execution": [_pick(e, *_EXECUTION) for e in data["executions"]],
        "provenance": {
            "source": data["source"],
            "artifacts": [_provenance(a) for a in data["artifacts"]],
        },
        "checks": [_pick(c, *_CHECK) for c in data["checks"]],
        "verdict": _pick(data["verdict"], *_VERDICT),
        "evidence": [d.to_json() for d in evidence],
        "baseline": _baseline(data["baseline"]),
        "launches": data["launches"],
    }


def _provenance(artifact: dict[str, Any]) -> dict[str, Any]:
    """An artifact's name, path, hash, size and what it depends on."""
    found = _pick(artifact, *_PROVENANCE)
    found["dependencies"] = [
        _pick(d, *_DEPENDENCY) for d in found.get("dependencies") or () if isinstance(d, dict)
    ]
    return found


def _baseline(compared: dict[str, Any] | None) -> dict[str, Any] | None:
    """The baseline as signed: which run (its result.json's digest) and what was lost."""
    if compared is None:
        return None
    return {**_pick(compared, *_BASELINE), "changes": compared["changes"]}


def _pick(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The named keys of a part of the record."""
    return {k: data[k] for k in keys if k in data}


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("gate").joinpath("schemas/manifest-predicate.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate(predicate: Any) -> str | None:  # noqa: ANN401 - any JSON value
    """None when ``predicate`` matches the schema, else the first problem on one line."""
    validator = jsonschema.Draft202012Validator(_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(predicate))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    return f"predicate field {where}: {error.message}"


def read(predicate: object, where: str) -> GatePredicate:
    """The typed predicate; BadInputError naming ``where`` when it is not a valid one."""
    problem = validate(predicate)
    if problem is not None or not isinstance(predicate, Mapping):
        raise BadInputError(f"{where}: {problem or 'the predicate is not an object'}")
    try:
        return _read(predicate, where)
    except (KeyError, TypeError, ValueError) as e:
        raise BadInputError(f"{where}: predicate field {e} is malformed") from e


def _read(p: Mapping[str, Any], where: str) -> GatePredicate:
    version = p["version"]
    run, env = p["run"], p["environment"]
    source = p["provenance"]["source"]
    driver, toolkit = env.get("driver") or {}, env.get("toolkit") or {}
    verdict = p["verdict"]
    return GatePredicate(
        version=version,
        tool_version=str(p["tool"]["version"]),
        run_id=run.get("run_id"),
        runner=run.get("runner"),
        runner_class=run.get("runner_class"),
        finished=run.get("finished"),
        revision=source.get("revision"),
        dirty=source.get("dirty"),
        repository=source.get("repository"),
        machine=SignedMachine(
            host_arch=env.get("host_arch"),
            driver_version=driver.get("driver_version"),
            driver_cuda_version=driver.get("cuda_version"),
            toolkit_version=toolkit.get("version"),
            toolkit_release=toolkit.get("release"),
            capability=p["device_code"]["device"].get("capability"),
        ),
        artifacts=tuple(
            SignedArtifact(a["name"], a.get("path"), a["sha256"], a.get("size"))
            for a in p["provenance"]["artifacts"]
        ),
        executions=tuple(_execution(x, where) for x in p["execution"]),
        checks=tuple(_check(c, version) for c in p["checks"]),
        verdict=SignedVerdict(
            bool(verdict["accepted"]), str(verdict["statement"]), tuple(verdict["reasons"])
        ),
        evidence=tuple(FileDigest(e["name"], e["sha256"], e["size"]) for e in p["evidence"]),
        image=_image(env.get("container"), version),
        launches=None if p.get("launches") is None else Launches.from_json(p["launches"], where),
    )


def _image(c: Mapping[str, Any] | None, version: int) -> SignedImage | None:
    """The image of a version 4 predicate; earlier ones named it without a subject."""
    if c is None:
        return None
    reference = str(c.get("reference") or c.get("image") or "")
    digest = c.get("digest") if isinstance(c.get("digest"), str) else None
    subject = str(c.get("name") or reference) if version >= 4 and digest and reference else None
    return SignedImage(reference, str(c.get("mode") or "inside"), subject, digest, c.get("runtime"))


def _execution(x: Mapping[str, Any], where: str) -> Execution:
    execution = Execution(
        entry_point=str(x["entry_point"]),
        path=ExecPath(x["path"]),
        command=str(x.get("command") or ""),
        returncode=x.get("returncode"),
        timed_out=bool(x.get("timed_out")),
        duration=float(x.get("duration") or 0.0),
        log=str(x.get("log") or ""),
        log_sha256=x.get("log_sha256"),
        output_ok=bool(x.get("output_ok", False)),
        expected_returncode=int(x.get("expected_returncode", 0)),
        cache_clean=bool(x.get("cache_clean", True)),
        failure=RuntimeFailure.from_text(x.get("failure")),
    )
    stored = x.get("passed")
    if isinstance(stored, bool) and stored != execution.passed:
        raise BadInputError(
            f"{where}: the signed run {execution.entry_point} [{execution.path.value}] says "
            f"passed={stored}, its own fields say {execution.passed}"
        )
    return execution


def _check(c: Mapping[str, Any], version: int) -> Check:
    if version < 2:
        state = CheckState.NOT_RUN if c.get("skipped") else CheckState.of(bool(c.get("passed")))
    else:
        state = CheckState(c["state"])
    cause = c.get("cause")
    path = c.get("path")
    return Check(
        name=str(c["name"]),
        classname=str(c.get("classname") or ""),
        state=state,
        message=str(c.get("message") or ""),
        cause=Cause(cause) if cause else None,
        path=ExecPath(path) if path else None,
    )
