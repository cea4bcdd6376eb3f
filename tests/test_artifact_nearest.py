"""A glob that matches nothing names the path the user most likely meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate import config
from gate.config import artifacts as artifacts_module
from gate.config.artifacts import nearest
from gate.errors import ConfigError

pytestmark = pytest.mark.unit


def tree(root: Path, *files: str) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    return root


@pytest.mark.parametrize(
    ("files", "pattern", "meant"),
    [
        # Built into another folder: the same file name, found anywhere under the project.
        (("build/lib/libmyk.so",), "build/libmyk.so", "build/lib/libmyk.so"),
        (("out/ap",), "build/ap", "out/ap"),
        (("build/release/ap",), "build/**/apx", "build/"),
        # A name a little off, in the deepest folder that exists.
        (("build/libmyk.so.1",), "build/libmyk.so", "build/libmyk.so.1"),
        (("build/ap",), "biuld/ap", "build/ap"),
        (("build/x",), "biuld/ap", "build/"),
        (("dist/x.whl",), "dist/*.wheel", "dist/x.whl"),
        # The folder is there, nothing in it like the glob: the folder.
        (("build/ap",), "build/*.so", "build/"),
        # Nothing near: nothing said.
        (("src/k.cu",), "zzz/q", None),
        (("src/k.cu",), "src/qqqq", "src/"),
    ],
)
def test_the_nearest_existing_path(
    tmp_path: Path, files: tuple[str, ...], pattern: str, meant: str | None
) -> None:
    assert nearest(tree(tmp_path, *files), pattern) == meant


def test_an_absolute_pattern_is_not_searched_for_from_the_root(tmp_path: Path) -> None:
    tree(tmp_path, "build/x")
    # libc.so.6 is somewhere under / on this machine: the project is where it is looked for.
    assert nearest(tmp_path, "/no-such-folder-here/libc.so.6") is None
    assert nearest(tmp_path, f"{tmp_path}/biuld/x") == "build/"  # inside: as the project has it


def test_hidden_folders_are_not_searched(tmp_path: Path) -> None:
    tree(tmp_path, ".git/objects/ap", "build/x")
    assert nearest(tmp_path, "bin/ap") is None


def test_the_search_reads_a_bounded_number_of_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree(tmp_path, *(f"a/f{i}" for i in range(30)), "z/deep/libmyk.so")
    monkeypatch.setattr(artifacts_module, "NEAREST_ENTRIES", 10)
    assert nearest(tmp_path, "build/libmyk.so") is None
    monkeypatch.setattr(artifacts_module, "NEAREST_ENTRIES", 1000)
    assert nearest(tmp_path, "build/libmyk.so") == "z/deep/libmyk.so"


def test_the_configuration_error_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, "build/lib/libmyk.so")
    (tmp_path / "cuda-gate.toml").write_text(
        '[[artifact]]\npath = "build/libmyk.so"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError) as raised:
        config.resolve_artifact_specs(config.load())
    assert raised.value.one_line() == (
        f"cuda-gate.toml: artifact[0].path: 'build/libmyk.so' matches no file in {tmp_path}; "
        "nearest: build/lib/libmyk.so"
    )
