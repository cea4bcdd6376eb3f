"""Where the gate is running: the CI run and its attempt, the runner, the run's page.

One place (the way cibuildwheel's ``ci.py`` is one) for what the run record, the store's
keys, the test-result attestation and the commit status say about the run: the run id
(``gh-<run id>-<attempt>`` under GitHub Actions, else a UTC timestamp with a random
suffix), the runner's name (``RUNNER_NAME``, else this host's), the runner class
(``CUDA_GATE_RUNNER_CLASS``), whether the runner is GitHub's or the project's own
(``RUNNER_ENVIRONMENT``) and the Actions run's URL, with its attempt.
"""

from __future__ import annotations

import platform
import secrets
from collections.abc import Mapping
from datetime import datetime

RUNNER_CLASS_ENV = "CUDA_GATE_RUNNER_CLASS"
# What the test-result attestation says about where the checks ran (gate.attest.testresult).
GITHUB_HOSTED = "github-hosted"
SELF_HOSTED = "self-hosted"
UNKNOWN_RUNNER = "unknown"  # under Actions, but the runner did not say (older GHES runners)
NOT_ACTIONS = "not-github-actions"  # a machine of the user's own, outside any workflow


def ci_run_id(env: Mapping[str, str]) -> str | None:
    """``gh-<GITHUB_RUN_ID>-<GITHUB_RUN_ATTEMPT>`` under GitHub Actions, else None."""
    run = env.get("GITHUB_RUN_ID")
    if not run:
        return None
    return f"gh-{run}-{env.get('GITHUB_RUN_ATTEMPT') or '1'}"


def run_id(env: Mapping[str, str], started: datetime) -> str:
    """This run's id: the CI run's, else ``<started, UTC>-<6 random hex digits>``."""
    return ci_run_id(env) or f"{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def runner_name(env: Mapping[str, str]) -> str:
    """The runner's name as Actions gives it, else this host's name."""
    return env.get("RUNNER_NAME") or platform.node()


def runner_class(env: Mapping[str, str]) -> str | None:
    """The runner class the workflow named (ci/runner-classes.json), or None."""
    return env.get(RUNNER_CLASS_ENV) or None


def runner_environment(env: Mapping[str, str]) -> str:
    """Whose machine ran the job: ``github-hosted`` or ``self-hosted`` as the Actions runner
    says (``RUNNER_ENVIRONMENT``), ``unknown`` under Actions without it, else
    ``not-github-actions``. Never guessed from labels: the runner sets it for every step."""
    said = env.get("RUNNER_ENVIRONMENT", "")
    if said in (GITHUB_HOSTED, SELF_HOSTED):
        return said
    return UNKNOWN_RUNNER if env.get("GITHUB_ACTIONS") == "true" else NOT_ACTIONS


def run_url(env: Mapping[str, str]) -> str | None:
    """The GitHub Actions run's page (and attempt), from the variables Actions sets."""
    parts = [env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    if not all(parts):
        return None
    server, repository, run = parts
    url = f"{server}/{repository}/actions/runs/{run}"
    attempt = env.get("GITHUB_RUN_ATTEMPT")
    return f"{url}/attempts/{attempt}" if attempt else url
