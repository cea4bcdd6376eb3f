"""What the user asked `cuda-gate run` to do, and what it makes of the configuration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.attest.signing import Signer
from gate.config import Config
from gate.config.options import RECORD_LAUNCHES, resolve
from gate.container.place import InImage
from gate.rules.targets import Target
from gate.scan.checksums import Checksums
from gate.stages.runs import DEFAULT_TIMEOUT
from gate.store.settings import StoreSettings
from gate.system import machine

if TYPE_CHECKING:
    from gate.baseline.resolve import Found


@dataclass(frozen=True)
class RunOptions:
    """What the user asked `cuda-gate run` to do."""

    evidence: Path = Path("gate-evidence")
    build_dir: Path | None = None
    project_dir: Path = Path()
    target: Target | None = None
    sass: tuple[Target, ...] | None = None
    ptx: tuple[Target, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    stop_after: str | None = None
    dump_sass: str = "auto"
    nvcc: str | None = None
    python: str | None = None
    signer: Signer | None = None
    use_cuobjdump: bool = True
    use_cache: bool = True
    store_settings: StoreSettings | None = None
    project_config: Config | None = None
    wait: bool = False  # for the evidence and build folders another run holds
    debug: bool = False  # print an internal error's traceback (always in the evidence)
    first_line: str = ""  # said once the folders are locked (which configuration, ...)
    prebuilt: Checksums | None = None  # gate these files instead of building (--prebuilt)
    baseline: Found | None = None  # the run to compare with (--baseline), read before the run
    record_launches: bool | None = None  # --[no-]record-launches; None: the config's, else on
    image: InImage | None = None  # --image (or the config's image), resolved before the run
    junit_file_attribute: bool = False  # --junit-file-attribute: file= on junit.xml's cases


def tools(
    nvcc: str, python: str | None, configured: str | None = None, *, in_image: bool = False
) -> dict[str, str]:
    """What ``{nvcc}`` and ``{python}`` stand for in this run (``python``: ``--python``;
    ``configured``: the config's ``python``; gate.system.machine.find_python orders them). In the
    image they name the image's: its nvcc, and ``--python``, the config's or ``python3``
    on the image's PATH."""
    found = {"nvcc": nvcc}
    if in_image:
        return {**found, "python": python or configured or "python3"}
    chosen = machine.find_python(python, configured)
    if chosen is not None:
        found["python"] = chosen
    return found


def records_launches(options: RunOptions, config: Config) -> bool:
    """Whether the runs go through the CUPTI launch recorder: always where it is needed (a
    ``require_launch``, ``[policy] launch_coverage``); else as ``--[no-]record-launches``
    says, else as ``record_launches`` says, else on. (Where CUPTI is missing, or a profiler
    holds CUDA_INJECTION64_PATH, the recorder stage says so and the runs go on without it.)"""
    if config.recorder_needs():
        return True
    return resolve(RECORD_LAUNCHES, options, None, config).value is not False
