"""Project configuration: discovery, strict validation, target placeholders (init: test_init)."""

from __future__ import annotations

import json
import re
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gate import config
from gate.commands.init import template
from gate.config.placeholders import PLACEHOLDERS, substitute, substitute_argv
from gate.errors import ConfigError, ExitCode
from gate.rules.targets import Target

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dlopen-kernels"
SM90 = Target.parse("sm_90")
SM121 = Target.parse("sm_121")
SM110 = Target.parse("sm_110")


def write(folder: Path, text: str, name: str = "cuda-gate.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(folder: Path, text: str, name: str = "cuda-gate.toml") -> str:
    write(folder, text, name)
    with pytest.raises(ConfigError) as info:
        config.load(folder)
    message = info.value.one_line()
    assert "\n" not in str(info.value)
    assert info.value.exit_code is ExitCode.CONFIG
    return message


GOOD = """
targets = ["sm_121"]
devices = ["12.1", "9.0"]
kernels = ["scale"]
[[build]]
name = "configure"
command = ["cmake", "-S", ".", "-B", "build", "-DCMAKE_CUDA_ARCHITECTURES={cmake_archs}"]
env = { TORCH_CUDA_ARCH_LIST = "{torch_arch_list}" }
timeout = 60
[[build]]
command = "cmake --build build"
[[artifact]]
path = "build/*.so"
kernels = ["scale_f32"]
[[entry_point]]
name = "app-f32"
command = ["build/app", "f32"]
cwd = "build"
env = { A = "1" }
timeout = 30
expected_returncode = 0
expected_output = "PASS"
[signing]
key_file = "keys/gate.pem"
[store]
url = "s3://bucket/prefix"
"""


def test_a_full_configuration_loads_into_records(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    loaded = config.load(tmp_path)
    assert loaded.source == tmp_path / "cuda-gate.toml"
    assert loaded.project_dir == tmp_path.resolve()
    assert [str(t) for t in loaded.targets] == ["sm_121"]
    assert [str(d) for d in loaded.devices] == ["12.1", "9.0"]
    assert [b.name for b in loaded.builds] == ["configure", "build-2"]
    assert loaded.builds[1].command == ("cmake", "--build", "build")
    assert loaded.builds[0].timeout == 60.0
    assert loaded.builds[1].timeout == config.BUILD_TIMEOUT
    entry = loaded.entry_points[0]
    assert entry.cwd == tmp_path.resolve() / "build"
    assert entry.env == (("A", "1"),)
    assert loaded.signing_key == tmp_path.resolve() / "keys" / "gate.pem"
    assert loaded.store == (("url", "s3://bucket/prefix"),)
    assert loaded.required_targets(SM90) == (SM90, SM121)
    assert loaded.required_targets(SM121) == (SM121,)


def test_an_entry_point_becomes_the_execute_record(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    entry = config.load(tmp_path).entry_points[0].entry_point()
    assert entry.argv == ("build/app", "f32")
    assert entry.cwd == str(tmp_path.resolve() / "build")
    assert dict(entry.env) == {"A": "1"}
    assert (entry.timeout, entry.expected_returncode, entry.expected_output) == (30.0, 0, "PASS")


PYTHON_ENTRY = """
python = "venv/bin/python"
[[entry_point]]
name = "ext-f16"
command = ["{python}", "check.py", "--dtype", "float16"]
env = { HELPER = "{python}" }
"""


def test_entry_points_take_python_and_nvcc_placeholders_only(tmp_path: Path) -> None:
    write(tmp_path, PYTHON_ENTRY)
    loaded = config.load(tmp_path)
    assert loaded.python == str(tmp_path.resolve() / "venv" / "bin" / "python")
    entry = loaded.entry_points[0].entry_point({"python": "/opt/py/bin/python3"})
    assert entry.argv == ("/opt/py/bin/python3", "check.py", "--dtype", "float16")
    assert dict(entry.env) == {"HELPER": "/opt/py/bin/python3"}
    with pytest.raises(ConfigError, match=r"\{python\} used, but the gate knows no python"):
        loaded.entry_points[0].entry_point({})
    write(tmp_path, '[[entry_point]]\ncommand = ["app", "{sm}"]\n')
    with pytest.raises(
        ConfigError, match=r"entry_point\[0\]\.command\[1\]: placeholder \{sm\} is not allowed here"
    ):
        config.load(tmp_path)


def test_the_smoke_programs_name_is_reserved(tmp_path: Path) -> None:
    write(tmp_path, '[[entry_point]]\nname = "smoke"\ncommand = ["app"]\n')
    with pytest.raises(ConfigError, match="built-in smoke program"):
        config.load(tmp_path)


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "0", "1e9"])
def test_timeouts_must_be_finite_positive_and_sane(tmp_path: Path, value: str) -> None:
    write(tmp_path, f'[[entry_point]]\ncommand = ["app"]\ntimeout = {value}\n')
    with pytest.raises(ConfigError, match=r"entry_point\[0\]\.timeout: expected a positive number"):
        config.load(tmp_path)


def test_a_build_step_renders_command_and_env_for_the_targets(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    rendered = config.load(tmp_path).builds[0].render([SM121])
    assert rendered.argv[-1] == "-DCMAKE_CUDA_ARCHITECTURES=121"
    assert rendered.env == (("TORCH_CUDA_ARCH_LIST", "12.1+PTX"),)
    assert rendered.cwd == tmp_path.resolve()


def test_without_any_file_only_the_smoke_program_runs(tmp_path: Path) -> None:
    loaded = config.load(tmp_path)
    assert loaded.source is None
    assert loaded.smoke
    assert (loaded.builds, loaded.artifacts, loaded.entry_points) == ((), (), ())


def test_pyproject_table_is_read_and_cuda_gate_toml_wins(tmp_path: Path) -> None:
    write(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    assert config.load(tmp_path).source is None
    write(tmp_path, '[tool.cuda-gate]\nkernels = ["k"]\n', "pyproject.toml")
    assert config.load(tmp_path).kernels == ("k",)
    write(tmp_path, 'kernels = ["own"]\n')
    assert config.load(tmp_path).kernels == ("own",)
    other = write(tmp_path, 'kernels = ["explicit"]\n', "other.toml")
    assert config.load(tmp_path, other).kernels == ("explicit",)


def test_an_explicit_file_sets_the_project_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = write(tmp_path / "sub", '[[artifact]]\npath = "a.so"\n', "gate.toml")
    (tmp_path / "sub" / "a.so").write_bytes(b"x")
    loaded = config.load(tmp_path, path)
    assert loaded.project_dir == (tmp_path / "sub").resolve()
    found = config.resolve_artifact_specs(loaded)
    assert [a.path for a in found] == [(tmp_path / "sub" / "a.so").resolve()]


BAD = [
    ("bogus = 1\n", "cuda-gate.toml: bogus: unknown key"),
    ('[[entry_point]]\ncommand = ["a"]\ncolour = 1\n', "entry_point[0].colour: unknown key"),
    ('[[build]]\ncommand = ["a"]\nenviron = {}\n', "build[0].environ: unknown key"),
    ('[[artifact]]\npath = "a"\nglob = "b"\n', "artifact[0].glob: unknown key"),
    ('[signing]\nkey = "k"\n', "signing.key: unknown key"),
    (
        ('[[entry_point]]\ncommand = ["a"]\n[[entry_point]]\ncommand = ["b"]\ntimeout = "soon"\n'),
        "cuda-gate.toml: entry_point[1].timeout: expected a number, got 'soon'",
    ),
    ('[[build]]\ncommand = ["a"]\ntimeout = true\n', "build[0].timeout: expected a number"),
    ('[[build]]\ncommand = ["a"]\ntimeout = -1\n', "build[0].timeout: expected a positive"),
    ('smoke = "yes"\n', "smoke: expected true or false, got 'yes'"),
    ('targets = "sm_90"\n', "targets: expected a list of strings, got 'sm_90'"),
    ("devices = [9.0]\n", "devices[0]: expected a string, got 9.0"),
    ('targets = ["sm_9x"]\n', "targets[0]: not a CUDA target"),
    ('devices = ["fast"]\n', "devices[0]: not a compute capability"),
    ("kernels = [1]\n", "kernels[0]: expected a string, got 1"),
    (
        '[build]\ncommand = ["a"]\n',
        "build: expected an array of tables ([[build]]), got a table",
    ),
    ('[[entry_point]]\ncommand = ["a", 1]\n', "entry_point[0].command[1]: expected a string"),
    ('[[entry_point]]\ncommand = ["a"]\nenv = { X = 1 }\n', "entry_point[0].env.X: expected"),
    (
        '[[entry_point]]\ncommand = ["a"]\nexpected_returncode = "0"\n',
        "entry_point[0].expected_returncode: expected an integer, got '0'",
    ),
    (
        '[[entry_point]]\ncommand = ["a"]\nexpected_output = "(unclosed"\n',
        "entry_point[0].expected_output: not a regular expression",
    ),
    ('[[entry_point]]\nname = "x"\n', "entry_point[0].command: missing"),
    ('[[build]]\nname = "x"\n', "build[0].command: missing"),
    ("[[build]]\ncommand = []\n", "build[0].command: empty command"),
    ('[[build]]\ncommand = "  "\n', "build[0].command: empty command"),
    ("[[build]]\ncommand = 3\n", "build[0].command: expected a list of arguments or a string"),
    ('[[build]]\ncommand = "echo \'open"\n', "build[0].command: cannot split"),
    ('[[artifact]]\nkernels = ["k"]\n', "artifact[0].path: missing"),
    ('[[artifact]]\npath = ""\n', "artifact[0].path: expected a non-empty string"),
    (
        '[[build]]\nname = "a"\ncommand = ["x"]\n[[build]]\nname = "a"\ncommand = ["y"]\n',
        "build[1].name: 'a' is used twice",
    ),
    ('[[entry_point]]\nname = "a b"\ncommand = ["x"]\n', "entry_point[0].name: 'a b': use"),
    (
        '[[build]]\ncommand = ["nvcc", "-arch={arch}"]\n',
        "build[0].command[1]: unknown placeholder",
    ),
    (
        '[[build]]\ncommand = ["make"]\nenv = { FLAGS = "{gencodes}" }\n',
        "build[0].env.FLAGS: unknown placeholder {gencodes}",
    ),
    ("smoke = false\n", "smoke: false, but no entry_point is configured"),
    ("store = 1\n", "store: expected a table, got 1"),
    ("targets = [\n", "cuda-gate.toml: not valid TOML"),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_each_bad_configuration_is_one_line_naming_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config.load()
    message = info.value.one_line()
    assert message.startswith("cuda-gate.toml: "), message
    assert expected in message
    assert "\n" not in str(info.value)


def test_pyproject_errors_name_the_tool_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "[tool.cuda-gate]\nbogus = 1\n", "pyproject.toml")
    with pytest.raises(ConfigError, match=r"^pyproject.toml: tool.cuda-gate.bogus: unknown key"):
        config.load()
    write(
        tmp_path,
        '[[tool.cuda-gate.entry_point]]\ncommand = ["a"]\ntimeout = "x"\n',
        "pyproject.toml",
    )
    with pytest.raises(ConfigError, match=r"tool.cuda-gate.entry_point\[0\].timeout: expected a"):
        config.load()


def test_a_missing_explicit_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: no such configuration file"):
        config.load(tmp_path, tmp_path / "nope.toml")


def test_an_explicit_pyproject_without_the_table_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    with pytest.raises(ConfigError, match=r"no \[tool.cuda-gate\] table"):
        config.load(tmp_path, path)


def test_globs_resolve_once_each_with_their_kernels(tmp_path: Path) -> None:
    (tmp_path / "build" / "lib").mkdir(parents=True)
    for name in ("a.so", "lib/b.so", "app"):
        (tmp_path / "build" / name).write_bytes(b"x")
    write(
        tmp_path,
        'kernels = ["k"]\n[[artifact]]\npath = "build/**/*.so"\nkernels = ["k2"]\n'
        '[[artifact]]\npath = "build/a.so"\nkernels = ["k3"]\n[[artifact]]\npath = "build/app"\n',
    )
    specs = config.resolve_artifact_specs(config.load(tmp_path))
    build = (tmp_path / "build").resolve()
    assert [s.path for s in specs] == [build / "a.so", build / "lib" / "b.so", build / "app"]
    assert specs[0].kernels == ("k", "k2", "k3")
    assert specs[1].kernels == ("k", "k2")
    assert specs[2].kernels == ("k",)
    assert not specs[0].is_wheel


def test_a_glob_matching_nothing_names_the_key_and_the_glob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "build").mkdir()
    write(tmp_path, '[[artifact]]\npath = "build/a.so"\n[[artifact]]\npath = "dist/*.whl"\n')
    (tmp_path / "build" / "a.so").write_bytes(b"x")
    with pytest.raises(ConfigError) as info:
        config.resolve_artifact_specs(config.load())
    assert info.value.one_line().startswith(
        "cuda-gate.toml: artifact[1].path: 'dist/*.whl' matches no file in "
    )
    write(tmp_path, '[[artifact]]\npath = "build"\n')
    with pytest.raises(ConfigError, match=r"artifact\[0\].path: 'build' matches only folders"):
        config.resolve_artifact_specs(config.load())


@pytest.mark.parametrize(
    ("target", "values"),
    [
        (SM90, ("sm_90", "compute_90", "90", "9.0", "90", "9.0+PTX")),
        (SM121, ("sm_121", "compute_121", "121", "12.1", "121", "12.1+PTX")),
        (SM110, ("sm_110", "compute_110", "110", "11.0", "110", "11.0+PTX")),
        (Target.parse("sm_90a"), ("sm_90a", "compute_90a", "90a", "9.0", "90a", "9.0a+PTX")),
    ],
)
def test_every_placeholder_for_one_target(target: Target, values: tuple[str, ...]) -> None:
    names = ("sm", "compute", "cc", "capability", "cmake_archs", "torch_arch_list")
    for name, value in zip(names, values, strict=True):
        assert substitute(f"<{{{name}}}>", [target]) == f"<{value}>"
    number = values[2]
    flag = f"-gencode=arch={values[1]},code=[{values[0]},{values[1]}]"
    assert substitute("X {gencode} Y", [target]) == f"X {flag} Y"
    assert substitute_argv(["nvcc", "{gencode}", "-o", "k{cc}"], [target]) == (
        "nvcc",
        "-gencode",
        f"arch={values[1]},code=[{values[0]},{values[1]}]",
        "-o",
        f"k{number}",
    )


def test_list_placeholders_cover_every_target_and_singles_refuse_several() -> None:
    both = [SM90, SM121]
    assert substitute("{cmake_archs}", both) == "90;121"
    assert substitute("{torch_arch_list}", both) == "9.0+PTX;12.1+PTX"
    assert substitute_argv(["{gencode}"], both) == (
        "-gencode",
        "arch=compute_90,code=[sm_90,compute_90]",
        "-gencode",
        "arch=compute_121,code=[sm_121,compute_121]",
    )
    with pytest.raises(ConfigError, match=r"^cmd\[1\]: \{sm\} names one target but 2 are required"):
        substitute_argv(["nvcc", "-arch={sm}"], both, where="cmd")


def test_escapes_shell_variables_and_other_braces_are_left_alone() -> None:
    text = '{{sm}} ${HOME} {"json": 1} $<CONFIG> {sm}'
    assert substitute(text, [SM90]) == '{sm} ${HOME} {"json": 1} $<CONFIG> sm_90'
    with pytest.raises(ConfigError, match=r"^value: unknown placeholder \{arch\}"):
        substitute("{arch}", [SM90])
    assert set(PLACEHOLDERS) == {
        "sm",
        "compute",
        "cc",
        "capability",
        "gencode",
        "cmake_archs",
        "torch_arch_list",
        "nvcc",
        "python",
    }


def test_nvcc_is_the_gates_own_and_required_when_used() -> None:
    assert substitute("-DCMAKE_CUDA_COMPILER={nvcc}", [SM90], tools={"nvcc": "/x/nvcc"}) == (
        "-DCMAKE_CUDA_COMPILER=/x/nvcc"
    )
    with pytest.raises(ConfigError, match=r"^cmd\[0\]: \{nvcc\} used, but the gate knows no nvcc"):
        substitute_argv(["{nvcc}", "-c"], [SM90], where="cmd")


@pytest.mark.parametrize("name", ["cuda-gate.toml", "cuda-gate-drop-arch.toml"])
def test_the_example_configurations_load(name: str) -> None:
    loaded = config.load(EXAMPLE, EXAMPLE / name)
    assert {e.name for e in loaded.entry_points} == {"app-f32", "app-f64", "app-sum"}
    assert loaded.artifacts[0].kernels == ("scale_f32", "scale_f64", "sum_f32")
    argv = loaded.builds[0].render([SM90], {"nvcc": "/usr/local/cuda/bin/nvcc"}).argv
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in argv
    assert "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc" in argv
    assert ("-DDROP_ARCH=ON" in argv) == (name == "cuda-gate-drop-arch.toml")


# What only the loader can check: regular expressions, unique names, placeholders, shell
# quoting, smoke-without-entry-points, and the TOML syntax itself.
LOADER_ONLY = (
    "not a regular expression",
    "is used twice",
    "unknown placeholder",
    "no entry_point",
    "not valid TOML",
    "cannot split",
)
SCHEMA_BAD = [case for case in BAD if not any(marker in case[1] for marker in LOADER_ONLY)]


def schema_validator() -> jsonschema.Draft202012Validator:
    text = resources.files("gate").joinpath("schemas/config.schema.json").read_text("utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_editor_schema_accepts_every_valid_configuration() -> None:
    validator = schema_validator()
    uncommented = re.sub(r"(?m)^# ?", "", template("toml"))
    examples = [
        (EXAMPLE / n).read_text("utf-8") for n in ("cuda-gate.toml", "cuda-gate-drop-arch.toml")
    ]
    for text in (GOOD, template("toml"), uncommented, *examples):
        errors = [e.message for e in validator.iter_errors(tomllib.loads(text))]
        assert errors == [], errors


@pytest.mark.parametrize(("text", "expected"), SCHEMA_BAD)
def test_the_editor_schema_rejects_what_it_can_express(text: str, expected: str) -> None:
    assert not schema_validator().is_valid(tomllib.loads(text)), expected


def test_torch_arch_list_refuses_a_family_target_torch_cannot_name() -> None:
    with pytest.raises(ConfigError, match=r"^build\[0\]\.env: \{torch_arch_list\} cannot name"):
        substitute("{torch_arch_list}", [Target.parse("sm_121f")], where="build[0].env")
    assert substitute("{torch_arch_list}", [Target.parse("sm_90a")]) == "9.0a+PTX"
