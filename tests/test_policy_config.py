"""``[policy]`` read from cuda-gate.toml and pyproject.toml: every key, every bad value, one line.

Fails closed: an unknown key, a value of the wrong type or a word outside a key's list
is a ConfigError naming the file and the key; the editor schema says the same.
"""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gate.config import parse_text
from gate.errors import ConfigError
from gate.pipeline import RunOptions, records_launches
from gate.rules.baseline import Level, Rule
from gate.rules.policy import DEFAULT_POLICY, Action, ReleasePolicy
from gate.rules.targets import Capability

pytestmark = pytest.mark.unit

FILE = Path("/project/cuda-gate.toml")


def policy(text: str, path: Path = FILE) -> ReleasePolicy:
    return parse_text(text, path).policy


def refused(text: str, path: Path = FILE) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_text(text, path)
    message = caught.value.message
    assert "\n" not in message
    return message


def test_no_policy_table_is_the_default_policy() -> None:
    assert policy("") == DEFAULT_POLICY
    assert policy("[policy]\n") == DEFAULT_POLICY


@pytest.mark.parametrize(
    ("key", "word", "action"),
    [
        ("missing_sass", "fail", Action.FAIL),
        ("missing_sass", "warn", Action.WARN),
        ("missing_ptx", "fail", Action.FAIL),
        ("missing_ptx", "warn", Action.WARN),
        ("missing_ptx", "allow", Action.ALLOW),
        ("surplus_targets", "allow", Action.ALLOW),
        ("surplus_targets", "warn", Action.WARN),
        ("surplus_targets", "fail", Action.FAIL),
        ("ptx_for_highest", "off", Action.OFF),
        ("ptx_for_highest", "warn", Action.WARN),
        ("ptx_for_highest", "fail", Action.FAIL),
        ("trap_stubs", "fail", Action.FAIL),
        ("trap_stubs", "warn", Action.WARN),
        ("launch_coverage", "off", Action.OFF),
        ("launch_coverage", "warn", Action.WARN),
        ("launch_coverage", "fail", Action.FAIL),
    ],
)
def test_every_action_key_takes_each_of_its_words(key: str, word: str, action: Action) -> None:
    read = policy(f'[policy]\n{key} = "{word}"\n')
    assert getattr(read, key) is action
    others = {k: v for k, v in vars(read).items() if k != key}
    assert others == {k: v for k, v in vars(DEFAULT_POLICY).items() if k != key}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'surplus_targets = "maybe"',
            'policy.surplus_targets: expected one of "allow", "warn", "fail", got "maybe"',
        ),
        (
            'missing_sass = "allow"',
            'policy.missing_sass: expected one of "fail", "warn", got "allow"',
        ),
        (
            'missing_ptx = "off"',
            'policy.missing_ptx: expected one of "fail", "warn", "allow", got "off"',
        ),
        (
            'ptx_for_highest = "allow"',
            'policy.ptx_for_highest: expected one of "off", "warn", "fail", got "allow"',
        ),
        ('trap_stubs = "off"', 'policy.trap_stubs: expected one of "fail", "warn", got "off"'),
        (
            'launch_coverage = "all"',
            'policy.launch_coverage: expected one of "off", "warn", "fail", got "all"',
        ),
        ('trap_stubs = "FAIL"', 'policy.trap_stubs: expected one of "fail", "warn", got "FAIL"'),
        ("missing_sass = true", 'policy.missing_sass: expected one of "fail", "warn", got True'),
        (
            "surplus_targets = 2",
            'policy.surplus_targets: expected one of "allow", "warn", "fail", got 2',
        ),
        (
            'ptx_as_device_code = "yes"',
            "policy.ptx_as_device_code: expected true or false, got 'yes'",
        ),
        ("ptx_as_device_code = 1", "policy.ptx_as_device_code: expected true or false, got 1"),
        (
            "strict = true",
            (
                "policy.strict: unknown key (known: baseline, launch_coverage, missing_ptx, "
                "missing_sass, ptx_as_device_code, ptx_for_highest, required_devices, "
                "surplus_targets, trap_stubs)"
            ),
        ),
        ('required_devices = ["12.1"]', "policy.required_devices: expected a table, got ['12.1']"),
        (
            'required_devices = { gb10 = "12.1" }',
            "policy.required_devices.gb10: expected a list of strings, got '12.1'",
        ),
        (
            "required_devices = { gb10 = [] }",
            "policy.required_devices.gb10: expected at least one capability (like 12.1)",
        ),
        (
            'required_devices = { gb10 = ["12.1", "twelve"] }',
            (
                "policy.required_devices.gb10[1]: not a compute capability (like 12.1 or 121): "
                "'twelve'"
            ),
        ),
        (
            'required_devices = { gb10 = ["12"] }',
            (
                "policy.required_devices.gb10[0]: ambiguous compute capability '12': write 12.0 "
                "(or sm_120)"
            ),
        ),
        (
            'required_devices = { " " = ["9.0"] }',
            "policy.required_devices. : a runner class name is empty",
        ),
        ("baseline = 1", "policy.baseline: expected a table, got 1"),
        (
            'baseline = { dropped_targets = "warn" }',
            (
                "policy.baseline.dropped_targets: unknown key (known: dropped_artifact, "
                "dropped_kernel, dropped_target, lost_native_route, newer_driver)"
            ),
        ),
        (
            'baseline = { dropped_target = "ignore" }',
            "policy.baseline.dropped_target: 'ignore': expected one of fail, warn",
        ),
    ],
)
def test_a_bad_policy_is_one_line_naming_the_file_and_the_key(line: str, message: str) -> None:
    assert refused(f"[policy]\n{line}\n") == f"{FILE}: {message}"


def test_the_policy_must_be_a_table() -> None:
    assert refused('policy = "strict"\n') == f"{FILE}: policy: expected a table, got 'strict'"


def test_in_pyproject_the_key_is_named_under_tool_cuda_gate() -> None:
    path = Path("/project/pyproject.toml")
    text = '[tool.cuda-gate.policy]\nsurplus_targets = "maybe"\n'
    assert refused(text, path) == (
        f"{path}: tool.cuda-gate.policy.surplus_targets: "
        'expected one of "allow", "warn", "fail", got "maybe"'
    )
    read = policy('[tool.cuda-gate.policy]\nsurplus_targets = "warn"\n', path)
    assert read.surplus_targets is Action.WARN


def test_required_devices_keep_the_files_order_and_each_capability_once() -> None:
    read = policy(
        "[policy]\n"
        'required_devices = { h200 = ["9.0", "sm_90", "90"], gb10 = ["121", "compute_121"] }\n'
    )
    assert read.required_devices == (
        ("h200", (Capability(9, 0),)),
        ("gb10", (Capability(12, 1),)),
    )


def test_ptx_as_device_code_is_a_flag() -> None:
    assert policy("[policy]\nptx_as_device_code = true\n").ptx_as_device_code is True
    assert policy("[policy]\nptx_as_device_code = false\n").ptx_as_device_code is False


def test_policy_baseline_and_baseline_are_one_table_given_once() -> None:
    nested = parse_text('[policy.baseline]\nnewer_driver = "warn"\n', FILE)
    alias = parse_text('[baseline]\nnewer_driver = "warn"\n', FILE)
    assert nested.baseline == alias.baseline == nested.policy.baseline
    assert nested.baseline.level(Rule.NEWER_DRIVER) is Level.WARN
    assert nested.baseline.level(Rule.DROPPED_TARGET) is Level.FAIL
    both = '[baseline]\nnewer_driver = "warn"\n[policy.baseline]\nnewer_driver = "warn"\n'
    assert refused(both) == (
        f"{FILE}: policy.baseline: given twice: as [baseline] and as [policy.baseline]; keep one"
    )


def test_the_dgx_spark_policy_of_the_docs_reads() -> None:
    doc = Path(__file__).resolve().parent.parent / "docs/configuration.md"
    text = doc.read_text(encoding="utf-8")
    start = text.index("```toml\n[policy]") + len("```toml\n")
    example = text[start : text.index("```", start)]
    read = policy(example)
    assert read.devices_for("gb10") == (Capability(12, 1),)
    assert read.ptx_for_highest is Action.FAIL
    assert read.trap_stubs is Action.FAIL


def schema() -> jsonschema.Draft202012Validator:
    text = resources.files("gate").joinpath("schemas/config.schema.json").read_text("utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def test_the_editor_schema_knows_the_policy_table() -> None:
    good = tomllib.loads(
        '[policy]\nmissing_sass = "warn"\nptx_as_device_code = true\nmissing_ptx = "allow"\n'
        'surplus_targets = "fail"\nptx_for_highest = "fail"\ntrap_stubs = "warn"\n'
        'launch_coverage = "warn"\nrequired_devices = { gb10 = ["12.1"] }\n'
        '[policy.baseline]\nnewer_driver = "warn"\n'
    )
    assert [e.message for e in schema().iter_errors(good)] == []
    for bad in (
        '[policy]\nsurplus_targets = "maybe"\n',
        "[policy]\nstrict = true\n",
        "[policy]\nrequired_devices = { gb10 = [] }\n",
        '[policy.baseline]\ndropped_target = "ignore"\n',
    ):
        assert not schema().is_valid(tomllib.loads(bad)), bad


@pytest.mark.parametrize(("word", "records"), [("off", False), ("warn", True), ("fail", True)])
def test_launch_coverage_turns_the_launch_recorder_on(word: str, records: bool) -> None:
    config = parse_text(f'[policy]\nlaunch_coverage = "{word}"\n', FILE)
    # on even where --no-record-launches would turn it off
    assert records_launches(RunOptions(record_launches=False), config) is records
    assert records_launches(RunOptions(), config)  # the default


@pytest.mark.parametrize("document", ["README.md", "docs/configuration.md"])
def test_the_dgx_spark_policy_shown_to_users_loads_as_written(document: str) -> None:
    text = (Path(__file__).resolve().parent.parent / document).read_text(encoding="utf-8")
    (block,) = [b for b in text.split("```toml\n")[1:] if b.startswith("[policy]\n")]
    shown = policy(block.split("```", 1)[0])
    assert shown.missing_ptx is Action.ALLOW
    assert shown.ptx_for_highest is Action.FAIL
    assert shown.surplus_targets is Action.WARN
    assert shown.launch_coverage is Action.WARN
    assert shown.devices_for("gb10") == (Capability(12, 1),)
