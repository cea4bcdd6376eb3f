"""`cuda-gate init`: the starting configuration loads, validates and runs; .gitignore is offered."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from gate import cli, config
from gate.commands import keygen
from gate.commands.init import GITIGNORE_COMMENT, GITIGNORE_LINES, missing_ignores, template
from gate.config.schema import tool_schema
from gate.errors import ExitCode
from gate.evidence import DEFAULT_DIR
from gate.pipeline import RunOptions
from gate.rules.targets import Target
from gate.store.settings import load_settings

SM121 = Target.parse("sm_121")
FORMS = [("toml", "cuda-gate.toml"), ("pyproject", "pyproject.toml")]


def uncomment(text: str) -> str:
    """The template with every example line ("# ...") made live; prose ("## ...") stays."""
    return re.sub(r"(?m)^# ?", "", text)


def table_of(text: str, name: str) -> dict[str, object]:
    """The configuration table as the registered schema sees it."""
    doc = tomllib.loads(text)
    table = doc["tool"]["cuda-gate"] if name == "pyproject.toml" else doc
    assert isinstance(table, dict)
    return table


def schema_errors(text: str, name: str) -> list[str]:
    """What the schema validate-pyproject is given (gate.config.schema) says of ``text``."""
    schema = tool_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    return [e.message for e in validator.iter_errors(table_of(text, name))]


@pytest.mark.unit
@pytest.mark.parametrize(("fmt", "name"), FORMS)
def test_the_template_loads_and_validates_as_written_and_with_every_example(
    tmp_path: Path, fmt: str, name: str
) -> None:
    text = template(fmt)
    plain = config.parse_text(text, tmp_path / name)
    assert plain.smoke
    assert (plain.builds, plain.entry_points, plain.store) == ((), (), ())
    assert schema_errors(text, name) == []
    # Without a [store] table the evidence goes to the local default folder.
    local = load_settings(config=plain, env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert (local.kind, local.local_dir) == ("local", tmp_path / "data" / "cuda-gate" / "evidence")

    live = uncomment(text)
    examples = config.parse_text(live, tmp_path / name)
    assert schema_errors(live, name) == []
    assert examples.python == str(tmp_path / ".venv" / "bin" / "python")
    assert examples.strict_libraries == ("libmine*.so*",)
    assert examples.is_strict(Path("/opt/x/libmine.so.1"))
    assert [b.name for b in examples.builds] == ["configure", "compile", "extension"]
    tools = {"nvcc": "/opt/cuda/bin/nvcc", "python": "/venv/bin/python3"}
    configure = examples.builds[0].render([SM121], tools).argv
    assert configure[-2:] == (
        "-DCMAKE_CUDA_ARCHITECTURES=121",
        "-DCMAKE_CUDA_COMPILER=/opt/cuda/bin/nvcc",
    )
    assert examples.builds[2].render([SM121], tools).argv[0] == "/venv/bin/python3"
    app, ext = (spec.entry_point(tools) for spec in examples.entry_points)
    assert app.argv[0] == "build/app"
    assert ext.argv[:2] == ("/venv/bin/python3", "-m")
    assert examples.artifacts[0].pattern == "build/*.so"
    assert examples.signing_key == tmp_path / f"{keygen.DEFAULT_PREFIX}.key"
    # The S3 example is a store the settings reader accepts, as written.
    s3 = load_settings(config=examples, env={})
    assert (s3.kind, s3.bucket, s3.prefix, s3.region) == (
        "s3",
        "my-evidence-bucket",
        "cuda-gate",
        "us-east-1",
    )
    assert (s3.object_lock_mode, s3.object_lock_days, s3.path_style) == ("COMPLIANCE", 365, True)


@pytest.mark.unit
def test_the_expected_output_examples_are_regular_expressions_as_the_comment_says() -> None:
    examples = config.parse_text(uncomment(template("toml")), Path("cuda-gate.toml"))
    app, ext = (spec.entry_point({"python": "python3"}) for spec in examples.entry_points)
    # Searched in stdout + stderr as gate.stages.runs does: a whole line PASS, not BYPASS.
    assert re.search(app.expected_output, "value=42\nPASS\n")
    assert not re.search(app.expected_output, "BYPASS\n")
    assert re.search(ext.expected_output, "max error: 0.000 ")
    assert not re.search(ext.expected_output, "max error: 0x00 ")
    assert "expected_output is a regular expression" in " ".join(
        line.removeprefix("## ") for line in template("toml").splitlines()
    )


@pytest.mark.unit
def test_the_gitignore_lines_name_the_gates_own_defaults() -> None:
    assert f"/{keygen.DEFAULT_PREFIX}.key" in GITIGNORE_LINES
    assert f"/{DEFAULT_DIR}/" in GITIGNORE_LINES
    assert f"/{RunOptions.evidence}/" in GITIGNORE_LINES
    assert "/gate-build/" in GITIGNORE_LINES  # gate.pipeline: gate-build beside the evidence
    assert not any(line.endswith(".pub") for line in GITIGNORE_LINES)  # the public key is kept


@pytest.mark.unit
def test_a_line_counts_as_present_in_any_equivalent_spelling() -> None:
    assert missing_ignores("") == GITIGNORE_LINES
    assert missing_ignores("gate-evidence\ncuda-gate.key\n  /gate-build/  \n") == ()
    assert missing_ignores("gate-evidence/\n#/cuda-gate.key\n!gate-build\n") == (
        "/cuda-gate.key",
        "/gate-build/",
    )


@pytest.mark.unit
def test_gitignore_lines_are_printed_and_appended_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ignore = tmp_path / ".gitignore"
    ignore.write_text("build/\n/gate-evidence", encoding="utf-8")  # no final newline
    ignore.chmod(0o640)
    assert cli.main(["init", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"add to {ignore} (or run again with --gitignore to append them):" in out
    assert "  /cuda-gate.key\n  /gate-build/\n" in out
    assert "/gate-evidence/" not in out
    assert ignore.read_text(encoding="utf-8") == "build/\n/gate-evidence"  # untouched

    assert cli.main(["init", "--dir", str(tmp_path), "--force", "--gitignore"]) == 0
    assert f"appended to {ignore}: /cuda-gate.key, /gate-build/" in capsys.readouterr().out
    assert ignore.read_text(encoding="utf-8") == (
        f"build/\n/gate-evidence\n\n{GITIGNORE_COMMENT}\n/cuda-gate.key\n/gate-build/\n"
    )
    assert ignore.stat().st_mode & 0o777 == 0o640
    before = ignore.read_text(encoding="utf-8")
    assert cli.main(["init", "--dir", str(tmp_path), "--force", "--gitignore"]) == 0
    out = capsys.readouterr().out
    assert ".gitignore" not in out
    assert ignore.read_text(encoding="utf-8") == before  # nothing twice


@pytest.mark.unit
def test_gitignore_is_created_only_with_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["init", "--dir", str(tmp_path)]) == 0
    assert "add to" in capsys.readouterr().out
    assert not (tmp_path / ".gitignore").exists()
    other = tmp_path / "other"
    other.mkdir()
    assert cli.main(["init", "--dir", str(other), "--gitignore"]) == 0
    written = (other / ".gitignore").read_text(encoding="utf-8")
    assert written == "\n".join((GITIGNORE_COMMENT, *GITIGNORE_LINES)) + "\n"


@pytest.mark.unit
def test_gitignore_through_a_link_changes_the_file_it_names(tmp_path: Path) -> None:
    shared = tmp_path / "shared.gitignore"
    shared.write_text("*.o\n", encoding="utf-8")
    project = tmp_path / "p"
    project.mkdir()
    (project / ".gitignore").symlink_to(shared)
    assert cli.main(["init", "--dir", str(project), "--gitignore"]) == 0
    assert (project / ".gitignore").is_symlink()
    assert shared.read_text(encoding="utf-8").startswith("*.o\n\n# cuda-gate")


@pytest.mark.unit
def test_cuda_gate_init_writes_refuses_and_forces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["init", "--dir", str(tmp_path)]) == 0
    written = (tmp_path / "cuda-gate.toml").read_text(encoding="utf-8")
    assert written == template("toml")
    assert config.load(tmp_path).smoke
    (tmp_path / "cuda-gate.toml").write_text("kernels = []\n", encoding="utf-8")
    assert cli.main(["init", "--dir", str(tmp_path)]) == ExitCode.CONFIG
    assert "already exists (use --force" in capsys.readouterr().err
    assert (tmp_path / "cuda-gate.toml").read_text(encoding="utf-8") == "kernels = []\n"
    assert cli.main(["init", "--dir", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "cuda-gate.toml").read_text(encoding="utf-8") == written


@pytest.mark.unit
def test_cuda_gate_init_appends_to_pyproject_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert cli.main(["init", "--dir", str(tmp_path), "--format", "pyproject"]) == 0
    text = pyproject.read_text(encoding="utf-8")
    assert text.startswith('[project]\nname = "x"\n\n')
    assert config.load(tmp_path).source == pyproject
    assert cli.main(["init", "--dir", str(tmp_path), "--format", "pyproject", "--force"]) == 7
    assert "already has a [tool.cuda-gate] section" in capsys.readouterr().err
    assert pyproject.read_text(encoding="utf-8") == text
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project\n", encoding="utf-8")
    assert cli.main(["init", "--dir", str(other), "--format", "pyproject"]) == 7
    assert "pyproject.toml: not valid TOML" in capsys.readouterr().err
    assert (other / "pyproject.toml").read_text(encoding="utf-8") == "[project\n"


def gate(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed gate, as a user runs it, in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "gate", *argv],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False, env=dict(os.environ),
    )  # fmt: skip


@pytest.mark.integration
def test_init_then_run_uses_the_written_configuration(tmp_path: Path) -> None:
    made = gate("init", "--gitignore", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    written = tmp_path / "cuda-gate.toml"
    loaded = config.load(tmp_path)
    assert loaded.source == written
    assert schema_errors(written.read_text(encoding="utf-8"), written.name) == []
    ran = gate("run", "--stop-after", "environment", "--no-store", cwd=tmp_path)
    # Accepted by the loader (not 7): the run went on to its environment stage and stopped.
    assert ran.returncode == int(ExitCode.NOT_ACCEPTED), ran.stdout + ran.stderr
    assert ran.stderr.splitlines()[0] == f"config: {written}"
    assert "stopped after the environment stage" in ran.stdout
    assert (tmp_path / "gate-evidence" / "result.json").is_file()
    # What the run wrote into the project is what init told git to ignore.
    ignored = (tmp_path / ".gitignore").read_text(encoding="utf-8").splitlines()
    made_here = {p.name for p in tmp_path.iterdir()} - {"cuda-gate.toml", ".gitignore"}
    assert made_here == {line.strip("/") for line in ignored if line.startswith("/gate-")}


@pytest.mark.integration
@pytest.mark.parametrize("live", [False, True], ids=["as-written", "examples-uncommented"])
def test_validate_pyproject_accepts_the_pyproject_form(tmp_path: Path, live: bool) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\nversion = "1"\n', encoding="utf-8")
    assert cli.main(["init", "--dir", str(tmp_path), "--format", "pyproject"]) == 0
    if live:
        head, _, section = pyproject.read_text(encoding="utf-8").partition("[tool.cuda-gate]")
        pyproject.write_text(head + "[tool.cuda-gate]" + uncomment(section), encoding="utf-8")
    checked = subprocess.run(
        [sys.executable, "-m", "validate_pyproject", str(pyproject)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
