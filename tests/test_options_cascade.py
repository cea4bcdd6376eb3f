"""The one options cascade (gate.config.options): CLI > environment > config > default."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from gate.attest import signing
from gate.config import Config
from gate.config import options as o
from gate.errors import ConfigError
from gate.reader.limits import ENV as LIMIT_VARIABLES
from gate.store.settings import STORE_VARIABLES
from gate.system import ci, machine

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Config(
    Path(), source=Path("cuda-gate.toml"), label="cuda-gate.toml", image="cfg:1",
    signing_key=Path("cfg.pem"), record_launches=False,
)  # fmt: skip
PYPROJECT = Config(Path(), label="pyproject.toml", prefix="tool.cuda-gate.", image="py:1")


def ns(**values: object) -> argparse.Namespace:
    return argparse.Namespace(**values)


# Each case: an option, the three layers given, then the value found and where from.
CASES: list[tuple[o.Option[Any], object, dict[str, str], Config | None, object, str]] = [
        # CLI beats env beats config beats default
        (o.IMAGE, ns(image="cli:1"), {}, CONFIG, "cli:1", "--image"),
        (o.IMAGE, ns(image=None), {}, CONFIG, "cfg:1", "cuda-gate.toml: image"),
        (o.IMAGE, ns(image=None), {}, PYPROJECT, "py:1", "pyproject.toml: tool.cuda-gate.image"),
        (o.IMAGE, ns(image=None), {}, None, None, "default"),
        (o.IMAGE, ns(image=""), {}, CONFIG, "", "--image"),  # `is not None`, as always
        (o.PUBLIC_KEY, ns(key=Path("a.pub")), {o.PUBLIC_KEY_FILE_ENV: "e.pub"}, None,
         Path("a.pub"), "--key"),
        (o.PUBLIC_KEY, ns(key=None), {o.PUBLIC_KEY_FILE_ENV: "e.pub"}, None, Path("e.pub"),
         o.PUBLIC_KEY_FILE_ENV),
        (o.PUBLIC_KEY, ns(key=None), {o.PUBLIC_KEY_FILE_ENV: ""}, None, Path("cuda-gate.pub"),
         "default"),
        (o.PUBLIC_KEY, None, {}, None, Path("cuda-gate.pub"), "default"),
        (o.RUNNER_CLASS, ns(runner_class="gb10"), {o.RUNNER_CLASS_ENV: "h100"}, None, "gb10",
         "--runner-class"),
        (o.RUNNER_CLASS, ns(runner_class=""), {o.RUNNER_CLASS_ENV: "h100"}, None, "h100",
         o.RUNNER_CLASS_ENV),  # `args.x or env`: an empty flag is left out, as always
        (o.RUNNER_CLASS, ns(), {o.RUNNER_CLASS_ENV: ""}, None, None, "default"),
        (o.NVCC, ns(nvcc=None), {"CUDA_GATE_NVCC": "/x/nvcc"}, None, "/x/nvcc", "CUDA_GATE_NVCC"),
        (o.NVCC, ns(nvcc="/y/nvcc"), {"CUDA_GATE_NVCC": "/x/nvcc"}, None, "/y/nvcc", "--nvcc"),
        # the signing key: --signing-key, the key file's variable, the PEM's, [signing] key_file
        (o.SIGNING_KEY, ns(signing_key=Path("k.pem")), {o.KEY_FILE_ENV: "f.pem",
         o.KEY_PEM_ENV: "PEM"}, CONFIG, Path("k.pem"), "--signing-key"),
        (o.SIGNING_KEY, ns(signing_key=None), {o.KEY_FILE_ENV: "f.pem", o.KEY_PEM_ENV: "PEM"},
         CONFIG, Path("f.pem"), o.KEY_FILE_ENV),
        (o.SIGNING_KEY, ns(signing_key=None), {o.KEY_PEM_ENV: " PEM\n"}, CONFIG, "PEM",
         o.KEY_PEM_ENV),
        (o.SIGNING_KEY, ns(signing_key=None), {o.KEY_PEM_ENV: " \n"}, CONFIG, Path("cfg.pem"),
         "cuda-gate.toml: signing.key_file"),  # a PEM of blanks is unset, as always
        (o.SIGNING_KEY, ns(signing_key=None), {o.KEY_FILE_ENV: " "}, None, Path(" "),
         o.KEY_FILE_ENV),  # only an empty file variable is unset
        (o.SIGNING_KEY, ns(signing_key=None), {}, None, None, "default"),
        (o.RECORD_LAUNCHES, ns(record_launches=True), {}, CONFIG, True, "--record-launches"),
        (o.RECORD_LAUNCHES, ns(record_launches=None), {}, CONFIG, False,
         "cuda-gate.toml: record_launches"),
        (o.RECORD_LAUNCHES, ns(record_launches=None), {}, None, True, "default"),
        (o.MAX_RATIO, ns(max_ratio="7"), {"CUDA_GATE_MAX_RATIO": "9"}, None, 7, "--max-ratio"),
        (o.MAX_RATIO, ns(max_ratio=None), {"CUDA_GATE_MAX_RATIO": "9"}, None, 9,
         "CUDA_GATE_MAX_RATIO"),
        (o.MAX_RATIO, ns(max_ratio=None), {"CUDA_GATE_MAX_RATIO": ""}, None, None, "default"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("option", "args", "env", "config", "expected"), [(*c[:4], c[4:]) for c in CASES]
)
def test_the_cascade(
    option: o.Option[Any],
    args: object,
    env: dict[str, str],
    config: Config | None,
    expected: tuple[object, str],
) -> None:
    value, source = expected
    found = o.resolve(option, args, env, config)
    assert (found.value, found.source) == (value, source)
    assert found.origin() == ("by default" if source == "default" else f"from {source}")


def test_an_option_is_found_by_its_name_too() -> None:
    assert o.resolve("runner_class", None, {o.RUNNER_CLASS_ENV: "gb10"}).value == "gb10"


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (ns(max_ratio=None), {"CUDA_GATE_MAX_RATIO": "lots"},
         "CUDA_GATE_MAX_RATIO: not a positive whole number: 'lots'"),
        (ns(max_ratio=None), {"CUDA_GATE_MAX_RATIO": " "},
         "CUDA_GATE_MAX_RATIO: not a positive whole number: ' '"),
        (ns(max_ratio="0"), {}, "--max-ratio: must be between 1 and 1073741824: 0"),
        # checked even where the command line wins, as Limits.from_env always did
        (ns(max_ratio="5"), {"CUDA_GATE_MAX_RATIO": "x"},
         "CUDA_GATE_MAX_RATIO: not a positive whole number: 'x'"),
    ],
)  # fmt: skip
def test_a_bad_value_is_one_config_error_naming_its_variable_or_flag(
    args: argparse.Namespace, env: dict[str, str], line: str
) -> None:
    with pytest.raises(ConfigError) as e:
        o.resolve(o.MAX_RATIO, args, env)
    assert e.value.one_line() == line


def test_every_command_line_value_is_checked_before_any_variable() -> None:
    bounds = (o.MAX_ENTRY_MB, o.MAX_RATIO)
    with pytest.raises(ConfigError, match=r"^--max-ratio:"):
        o.resolve_all(bounds, ns(max_entry_mb=None, max_ratio="x"), {"CUDA_GATE_MAX_ENTRY_MB": "y"})


def test_the_table_names_the_variables_the_readers_use() -> None:
    assert o.RUNNER_CLASS_ENV == ci.RUNNER_CLASS_ENV
    assert o.PYTHON.env == (machine.PYTHON_ENV,)
    bounds = (o.MAX_ENTRY_MB, o.MAX_ARTIFACT_MB, o.MAX_MEMBER_MB, o.MAX_RATIO)
    assert tuple(b.env[0] for b in bounds) == tuple(LIMIT_VARIABLES.values())
    assert {v for opt in (o.STORE, *o.STORE_TABLE) for v in opt.env} == set(STORE_VARIABLES)


def test_every_cuda_gate_variable_is_an_option_or_internal() -> None:
    named = {v for opt in o.OPTIONS.values() for v in opt.env} | set(o.INTERNAL_VARIABLES)
    found = set()
    for path in (ROOT / "gate").rglob("*"):
        if path.suffix in (".py", ".cpp"):
            found |= set(re.findall(r"CUDA_GATE_[A-Z0-9_]*[A-Z0-9]", path.read_text("utf-8")))
    # CUDA_GATE_MAX_ and CUDA_GATE_S3_ prefixes in prose are not variables.
    assert sorted(found - named - {"CUDA_GATE_MAX", "CUDA_GATE_S3"}) == []


def test_describe_lists_the_layers_in_order() -> None:
    assert o.describe(o.SIGNING_KEY) == (
        "--signing-key, CUDA_GATE_SIGNING_KEY_FILE, CUDA_GATE_SIGNING_KEY, config signing.key_file"
    )


# The commands' own option handling, through the cascade (no process started).


def _limits_args(**given: str | None) -> argparse.Namespace:
    names = ("max_entry_mb", "max_artifact_mb", "max_member_mb", "max_ratio")
    return ns(**{name: given.get(name) for name in names})


def test_inspect_bounds_take_the_option_over_the_variable_over_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gate.commands.inspect import _limits
    from gate.reader.limits import MB, Limits

    monkeypatch.setenv("CUDA_GATE_MAX_RATIO", "9")
    monkeypatch.setenv("CUDA_GATE_MAX_ENTRY_MB", "3")
    found = _limits(_limits_args(max_ratio="7"))
    assert found == Limits(entry=3 * MB, ratio=7)
    monkeypatch.setenv("CUDA_GATE_MAX_MEMBER_MB", "many")
    with pytest.raises(ConfigError, match=r"^CUDA_GATE_MAX_MEMBER_MB: not a positive"):
        _limits(_limits_args(max_member_mb="5"))


def test_diff_runner_class_takes_the_flag_else_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gate.commands.diff import which

    monkeypatch.setenv(o.RUNNER_CLASS_ENV, "h100")
    assert which(ns(runner_class="gb10", runner=None)).runner_class == "gb10"
    assert which(ns(runner_class="", runner=None)).runner_class == "h100"
    monkeypatch.delenv(o.RUNNER_CLASS_ENV)
    assert which(ns(runner_class=None, runner="r1")).runner_class is None


def test_verify_public_key_takes_the_flag_the_variable_else_an_existing_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gate.commands.verify import _public_key_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(o.PUBLIC_KEY_FILE_ENV, "env.pub")
    assert _public_key_path(Path("cli.pub")) == Path("cli.pub")
    assert _public_key_path(None) == Path("env.pub")  # named: need not exist yet
    monkeypatch.setenv(o.PUBLIC_KEY_FILE_ENV, "")
    with pytest.raises(ConfigError, match="no public key to verify with"):
        _public_key_path(None)
    (tmp_path / "cuda-gate.pub").write_text("", encoding="utf-8")
    assert _public_key_path(None) == Path("cuda-gate.pub")


def test_records_launches_flag_over_config_over_on() -> None:
    from gate.pipeline.options import RunOptions, records_launches

    off = Config(Path(), record_launches=False)
    assert records_launches(RunOptions(record_launches=True), off) is True
    assert records_launches(RunOptions(), off) is False
    assert records_launches(RunOptions(), Config(Path())) is True
    assert records_launches(RunOptions(record_launches=False), Config(Path())) is False


def test_the_signer_comes_from_the_resolved_key(tmp_path: Path) -> None:
    from gate.commands.sign import load_signer

    pair = signing.generate_key_pair()
    key = tmp_path / "k.pem"
    key.write_bytes(pair.private_pem)
    pem = pair.private_pem.decode("ascii")
    from_pem = load_signer(o.resolve(o.SIGNING_KEY, None, {o.KEY_PEM_ENV: f"\n{pem}  "}))
    from_file = load_signer(o.resolve(o.SIGNING_KEY, None, {o.KEY_FILE_ENV: str(key)}))
    assert from_pem is not None
    assert from_file is not None
    assert (from_pem.keyid, from_pem.file) == (pair.keyid, None)
    assert (from_file.keyid, from_file.file) == (pair.keyid, key)
    assert load_signer(o.resolve(o.SIGNING_KEY, None, {})) is None
    with pytest.raises(ConfigError, match=r"cannot read the signing key"):
        load_signer(o.resolve(o.SIGNING_KEY, None, {o.KEY_FILE_ENV: str(tmp_path / "no")}))
