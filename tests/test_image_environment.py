"""An image read by distribution gives the report its files give unpacked, plus where they are.

A hand-written OCI layout (tests/oci_layouts.py) holding real nvcc-built golden binaries
(tests/golden): a pip-style distribution under /usr/local (its RECORD naming a tool in
/usr/local/bin as ``../../../bin/...``), one in /usr/lib/python3/dist-packages, a venv
under /opt added by a second layer that also deletes one of the first distribution's
libraries (a whiteout), a wheel, and a library outside any distribution. The same files
written into a folder give the same document once the image-only fields are dropped.
`inspect` runs in process.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.cli import main
from gate.errors import ExitCode
from gate.scan import cache as inspection_cache
from tests.oci_layouts import Layout, Member, whiteout

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
SM120 = (GOLDEN / "libkernels.so").read_bytes()  # sm_80, sm_120 SASS, compute_80 PTX
SM90A = (GOLDEN / "sm_90a.cubin").read_bytes()  # sm_90a only
HOST_ONLY = Path(shutil.which("true") or "/bin/true").read_bytes()  # no device code
SITE = "usr/local/lib/python3.12/site-packages"
DIST = "usr/lib/python3/dist-packages"
VENV = "opt/venv/lib/python3.12/site-packages"


def _dist(site: str, name: str, version: str, files: dict[str, bytes]) -> dict[str, bytes]:
    """A distribution as pip installs it: its files, METADATA, and a RECORD naming them
    relative to the site-packages folder (``../../../bin/x`` for a script)."""
    info = f"{site}/{name}-{version}.dist-info"
    rows = [f"{rel},sha256=x,{len(data)}" for rel, data in files.items()]
    rows += [f"{name}-{version}.dist-info/METADATA,,", f"{name}-{version}.dist-info/RECORD,,"]
    found = {os.path.normpath(f"{site}/{rel}"): data for rel, data in files.items()}
    found[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    found[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    return found


def _wheel(name: str, version: str, library: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(f"{name}/lib{name}.so", library)
        z.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
    return out.getvalue()


BASE = {
    **_dist(SITE, "kernels", "1.0", {
        "kernels/libkernels.so": SM120,
        "kernels/libold.so": SM90A,  # deleted by the second layer
        "../../../bin/kernels-tool": SM120,
    }),
    **_dist(DIST, "hostonly", "2.0", {"hostonly/_speedups.so": HOST_ONLY}),
    "usr/lib/x86_64-linux-gnu/libloose.so": SM120,
}  # fmt: skip
ADDED = {
    **_dist(VENV, "hopper", "3.0", {"hopper/libh.so": SM90A}),
    "opt/venv/pyvenv.cfg": b"home = /usr/bin\n",
    "opt/wheels/fast-1.0-py3-none-any.whl": _wheel("fast", "1.0", SM120),
}
GONE = f"{SITE}/kernels/libold.so"


def _members(files: dict[str, bytes]) -> list[Member]:
    return [Member(path, data) for path, data in files.items()]


@pytest.fixture
def image(tmp_path: Path) -> tuple[Layout, str]:
    layout = Layout(tmp_path / "img")
    digest = layout.image([_members(BASE), [*_members(ADDED), whiteout(GONE)]])
    return layout, digest


@pytest.fixture
def unpacked(tmp_path: Path) -> Path:
    """The image's files as its two layers leave them, written into a folder."""
    root = tmp_path / "unpacked"
    for path, data in {**BASE, **ADDED}.items():
        if path != GONE:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
    return root


def _schema() -> dict[str, Any]:
    text = resources.files("gate").joinpath("schemas/environment.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _document(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    argv = ["inspect", "--no-detect", "--json", "--device", "12.1", "--device", "9.0", *args]
    assert main(argv) == 0, capsys.readouterr().err
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, _schema())
    return doc


def without_image(doc: dict[str, Any], label: str, root: Path) -> dict[str, Any]:
    """The document without what only an image has, its files named as unpacked in ``root``
    (``SOURCE!/usr/lib/x.so`` as ``ROOT/usr/lib/x.so``: in sources, reasons, errors)."""
    doc = json.loads(json.dumps(doc))
    doc.pop("images")
    for dist in doc["distributions"]:
        dist.pop("image")
    renamed: dict[str, Any] = json.loads(json.dumps(doc).replace(label, f"{root}/"))
    return renamed


def test_the_image_gives_the_report_of_its_files_unpacked(
    image: tuple[Layout, str], unpacked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout, _ = image
    source = f"oci:{layout.root}"
    from_image = _document(capsys, source)
    from_folder = _document(capsys, "--by-distribution", str(unpacked))
    assert without_image(from_image, f"{source}!/", unpacked) == from_folder
    by = {d["name"]: d for d in from_image["distributions"]}
    assert sorted(by) == ["fast", "hopper", "hostonly", "kernels", "usr/lib/x86_64-linux-gnu/"]
    # RECORD ownership across the tree, and the whiteout: the deleted library is gone.
    assert by["kernels"]["groups"][0]["members"] == [
        "../../../bin/kernels-tool", "kernels/libkernels.so",
    ]  # fmt: skip
    assert [d["category"] for d in by["kernels"]["devices"]] == ["compatible SASS", "PTX JIT"]
    assert by["hostonly"]["with_device_code"] == 0
    assert by["hopper"]["devices"][0]["passes"] is False


def test_the_document_records_the_image_digest_and_each_artifacts_layer(
    image: tuple[Layout, str], capsys: pytest.CaptureFixture[str]
) -> None:
    layout, digest = image
    doc = _document(capsys, f"oci:{layout.root}")
    (img,) = doc["images"]
    assert img["digest"] == digest
    assert [layer["digest"] for layer in img["layers"]] == layout.layer_digests
    first, second = layout.layer_digests
    by = {d["name"]: d["image"] for d in doc["distributions"]}
    assert {p["digest"] for p in by.values()} == {digest}
    assert by["kernels"]["path"] == f"/{SITE}/kernels-1.0.dist-info"
    assert (by["kernels"]["layer"], by["kernels"]["layer_digest"]) == (0, first)
    assert by["kernels"]["artifacts"] == [
        {"member": "../../../bin/kernels-tool", "path": "/usr/local/bin/kernels-tool",
         "layer": 0, "layer_digest": first},
        {"member": "kernels/libkernels.so", "path": f"/{SITE}/kernels/libkernels.so",
         "layer": 0, "layer_digest": first},
    ]  # fmt: skip
    assert (by["hopper"]["path"], by["hopper"]["layer"]) == (f"/{VENV}/hopper-3.0.dist-info", 1)
    assert by["fast"]["path"] == "/opt/wheels/fast-1.0-py3-none-any.whl"
    assert by["fast"]["artifacts"][0]["path"] == "/opt/wheels/fast-1.0-py3-none-any.whl"
    assert by["fast"]["artifacts"][0]["layer_digest"] == second
    loose = by["usr/lib/x86_64-linux-gnu/"]
    assert (loose["path"], loose["layer"]) == ("/usr/lib/x86_64-linux-gnu", None)
    assert loose["artifacts"][0]["layer"] == 0


def test_the_text_names_the_image_and_with_verbose_each_layer(
    image: tuple[Layout, str], capsys: pytest.CaptureFixture[str]
) -> None:
    layout, digest = image
    source = f"oci:{layout.root}"
    first, second = layout.layer_digests
    argv = ["inspect", "--no-detect", "--device", "12.1", source]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"image {source}: linux/amd64, 2 layers, digest {digest}, config ")
    assert out[1] == "4 distributions with device code, 1 without; 6 artifacts read"
    assert not any("layer 1 of 2" in line for line in out)
    assert main([*argv, "--verbose"]) == 0
    out = capsys.readouterr().out.splitlines()
    kernels = out.index(f"    /{SITE}/kernels-1.0.dist-info: layer 1 of 2 ({first})")
    assert out[kernels + 1] == (
        f"    layer 1 of 2 ({first}): ../../../bin/kernels-tool, kernels/libkernels.so"
    )
    assert f"    layer 2 of 2 ({second}): hopper/libh.so" in out
    # A distribution without device code is listed by name, then where it is.
    at = out.index("  hostonly 2.0")
    assert out[at + 1].startswith(f"    /{DIST}/hostonly-2.0.dist-info: layer 1 of 2")
    assert out[at + 2] == f"    layer 1 of 2 ({first}): hostonly/_speedups.so"


def test_require_device_fails_the_images_distributions_that_cannot_run(
    image: tuple[Layout, str], capsys: pytest.CaptureFixture[str]
) -> None:
    layout, _ = image
    code = main(["inspect", "--no-detect", "--require-device", "12.1", f"oci:{layout.root}"])
    err = capsys.readouterr().err.splitlines()
    assert code == ExitCode.NOT_ACCEPTED
    failed = [line.split(": ")[2] for line in err if "does not run on" in line]
    assert failed == ["hopper 3.0"]  # kernels runs: its sm_90a-only library was deleted
    assert main(["inspect", "--no-detect", "--require-device", "9.0", f"oci:{layout.root}"]) == 0


def test_by_file_keeps_the_per_file_view_of_an_image(
    image: tuple[Layout, str], capsys: pytest.CaptureFixture[str]
) -> None:
    layout, _ = image
    source = f"oci:{layout.root}"
    assert main(["inspect", "--no-detect", "--json", "--by-file", source]) == 0
    doc = json.loads(capsys.readouterr().out)
    paths = sorted(art["image"]["path"] for art in doc["artifacts"])
    assert f"/{GONE}" not in paths
    assert "/usr/local/bin/kernels-tool" in paths
    assert "distributions" not in doc


def test_an_unreadable_image_is_one_line_beside_the_rest(
    image: tuple[Layout, str], unpacked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout, _ = image
    blob = layout.blob_path(layout.layer_digests[1])
    data = bytearray(blob.read_bytes())
    data[60] ^= 1
    blob.write_bytes(bytes(data))
    code = main(["inspect", "--no-detect", "--device", "12.1", f"oci:{layout.root}",
                 str(unpacked / VENV)])  # fmt: skip
    captured = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT
    errors = captured.err.splitlines()
    assert len(errors) == 2, errors
    assert errors[0].startswith(f"cuda-gate: error: {layout.root}: layer 1 ")
    assert errors[1] == "cuda-gate: error: 1 error(s) reading the environment"
    assert "Traceback" not in captured.err
    assert any(line.startswith("hopper ") for line in captured.out.splitlines())


def test_an_image_audit_remembers_no_walk_of_its_temporary_folder(
    image: tuple[Layout, str],
    unpacked: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The image's files are laid out in a folder made for one audit: a tree document for
    it would never be read again (an unpacked folder's is)."""
    cache = tmp_path / "walk-cache"
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(cache))
    monkeypatch.setattr(inspection_cache, "RACY_NS", 0)  # files just written may be remembered
    layout, _ = image
    _document(capsys, "--names", f"oci:{layout.root}")
    assert cache.is_dir()  # the reports were kept
    assert not (cache / "trees").exists()
    _document(capsys, "--names", "--by-distribution", str(unpacked))
    assert len(list((cache / "trees").glob("*.json"))) == 1
