"""The project's gate configuration: ``cuda-gate.toml``, or ``[tool.cuda-gate]`` in pyproject.toml.

Where it comes from: ``--config PATH`` when given (a file named ``pyproject.toml`` is
read from its ``[tool.cuda-gate]`` table, any other file from its top level); else
``cuda-gate.toml`` in the project folder; else ``[tool.cuda-gate]`` of its
``pyproject.toml``; else the defaults, which run only the built-in smoke program.
Relative paths in the file (``cwd``, artifact globs, ``key_file``) are relative to
the folder holding the file. The shape (keys of a cuda-gate.toml; in pyproject.toml
every table sits under ``tool.cuda-gate``)::

    python = "/opt/venv/bin/python"  # the project's interpreter for {python} (optional)
    targets = ["sm_90"]        # required targets; the detected one is always required
    devices = ["12.1", "9.0"]  # capabilities to predict routes for in the report
    kernels = ["scale_f32"]    # kernels every artifact must carry (plain or mangled names)
    smoke = true               # also build and run the built-in smoke program
    strict_libraries = ["libmine*.so*"]  # loaded libraries judged per kernel, like artifacts
    host = "aarch64"           # the host the artifacts ship for (default: the device's only
                               # host class where it has one, 12.1 -> aarch64; else this one)
    stale_artifacts = "warn"   # an artifact the build did not write: "warn" or "fail"
    record_launches = true     # the CUPTI launch recorder in every run (the default; false
                               # turns it off, unless a require_launch needs it)
    image = "ghcr.io/org/app@sha256:..."  # run inside this delivery image (as --image does)

    [container]                # how the image runs (only with image / --image)
    runtime = "podman"         # or "docker", or a path; default: podman, else docker on PATH
    gpus = "auto"              # "auto" | "cdi" (--device nvidia.com/gpu=all) | "flag"
                               # (--gpus all) | "none"
    options = ["--network=none"]  # more `run` options, given to every container

    [[build]]                  # run in order before inspection
    name = "configure"         # optional: build-1, build-2, ...
    command = ["cmake", "-S", ".", "-B", "build", "-DCMAKE_CUDA_ARCHITECTURES={cmake_archs}"]
    cwd = "."                  # optional; a command may also be one string (split like a shell)
    env = { TORCH_CUDA_ARCH_LIST = "{torch_arch_list}" }
    timeout = 1800             # seconds; optional

    [[artifact]]               # final artifacts: globs (``**`` allowed) or wheels (*.whl)
    path = "build/libkernels.so"
    kernels = ["scale_f64"]    # optional: kernels this artifact must carry too
    require_launch = ["scale_f64"]  # optional: kernels the entry points must launch on
                               # both paths ("all": every kernel it carries)

    [[entry_point]]            # each runs natively and through forced PTX JIT
    name = "app-f32"           # optional: entry-1, ...; letters, digits, . _ -
    command = ["build/app", "f32"]
    cwd = "."; env = {}; timeout = 300
    expected_returncode = 0
    expected_output = "PASS"   # optional regular expression searched in stdout + stderr
    # command and env may use {python} and {nvcc} (nothing else is substituted)

    [signing]
    key_file = "keys/gate.pem" # optional Ed25519 private key for the manifest

    [store]                    # read by gate.store.settings (see there)

    [policy]                   # the release policy (gate.rules.policy; defaults shown)
    missing_sass = "fail"      # a required target without SASS: "fail" | "warn"
    ptx_as_device_code = false # PTX that JIT-compiles for a required target stands in for its SASS
    missing_ptx = "fail"       # a required target without PTX: "fail" | "warn" | "allow"
    ptx_for_highest = "off"    # compute_N for the highest required N: "off" | "warn" | "fail"
    surplus_targets = "allow"  # SASS no required target asked for: "allow" | "warn" | "fail"
    trap_stubs = "fail"        # kernels that only trap on a checked device: "fail" | "warn"
    launch_coverage = "off"    # kernels no entry point launched: "off" | "warn" | "fail"
    required_devices = { gb10 = ["12.1"] }  # per runner class (CUDA_GATE_RUNNER_CLASS):
                               # capabilities every artifact must have a route on

    [policy.baseline]          # what a loss against --baseline does: "fail" (default) or "warn"
    dropped_target = "fail"    # also dropped_artifact, dropped_kernel, lost_native_route,
                               # newer_driver (gate.rules.baseline); [baseline] is the same
                               # table (one of the two)

``gate/schemas/config.schema.json`` describes the same shape for editors (Taplo); this
package stays the authority. Build commands and their ``env`` values may use the target
placeholders of :mod:`gate.config.placeholders`; entry points are taken literally. Every
problem is one ConfigError line naming the file and the key, such as
``cuda-gate.toml: entry_point[1].timeout: expected a number, got 'soon'``. Every value is
bounded as the file loads (the file 1 MiB, a string 64 Ki characters, a path 4,096, a name
128: :mod:`gate.config.values`), before anything reads further.

Its modules: :mod:`gate.config.files` (finding and reading the file), :mod:`gate.config.tables`
(its tables validated), :mod:`gate.config.records` (what they become),
:mod:`gate.config.artifacts` (the artifact globs resolved after the build), and the value
checks, placeholders and ``[policy]`` table beside them. Import from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.lazy import exports

if TYPE_CHECKING:
    from gate.config.artifacts import resolve_artifact_specs
    from gate.config.files import CONFIG_FILE, MAX_DEPTH, PYPROJECT, find_config, load, parse_text
    from gate.config.placeholders import PLACEHOLDERS, substitute
    from gate.config.records import (
        BUILD_TIMEOUT,
        SMOKE_NAME,
        ArtifactSpec,
        BuildCommand,
        BuildStep,
        Config,
        ContainerSettings,
        EntryPoint,
        EntryPointSpec,
        ResolvedArtifact,
    )
    from gate.config.tables import parse

# Each public name's module: imported on first use, so that a command needing one part
# (inspect: gate.config.options) does not pay for the rest (records -> rules.baseline).
_WHERE = {
    "ArtifactSpec": "records",
    "BUILD_TIMEOUT": "records",
    "BuildCommand": "records",
    "BuildStep": "records",
    "CONFIG_FILE": "files",
    "Config": "records",
    "ContainerSettings": "records",
    "EntryPoint": "records",
    "EntryPointSpec": "records",
    "MAX_DEPTH": "files",
    "PLACEHOLDERS": "placeholders",
    "PYPROJECT": "files",
    "ResolvedArtifact": "records",
    "SMOKE_NAME": "records",
    "find_config": "files",
    "load": "files",
    "parse": "tables",
    "parse_text": "files",
    "resolve_artifact_specs": "artifacts",
    "substitute": "placeholders",
}

__all__ = [
    "BUILD_TIMEOUT",
    "CONFIG_FILE",
    "MAX_DEPTH",
    "PLACEHOLDERS",
    "PYPROJECT",
    "SMOKE_NAME",
    "ArtifactSpec",
    "BuildCommand",
    "BuildStep",
    "Config",
    "ContainerSettings",
    "EntryPoint",
    "EntryPointSpec",
    "ResolvedArtifact",
    "find_config",
    "load",
    "parse",
    "parse_text",
    "resolve_artifact_specs",
    "substitute",
]


_exports = exports(__name__, _WHERE, globals())


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use."""
    return _exports(name)
