"""METADATA read without the email package: the same fields its HeaderParser gives."""

from __future__ import annotations

from email.parser import HeaderParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.reader.metadata import header_fields

pytestmark = pytest.mark.unit

_LINES = st.sampled_from(
    [
        "Metadata-Version: 2.1", "Name: torch", "name:  other", "Version: 2.14.1",
        "Version:\t1.0 ", "Summary: a\r", "  folded more", "\tfolded tab", "From x", "From ",
        ": no name", "No colon here", "", "X-Y: z: w", "Name:", "NAME: caps", " ", "\x85odd",
        "Description-Content-Type: text/markdown", "Name: ünïcode",
    ]
)  # fmt: skip


def _email(text: str) -> dict[str, str]:
    message = HeaderParser().parsestr(text, headersonly=True)
    found: dict[str, str] = {}
    for key, value in message.items():
        found.setdefault(key.lower(), value)
    return found


@given(
    st.lists(_LINES, max_size=12),
    st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=12, max_size=12),
    st.booleans(),
)
def test_the_same_fields_as_the_email_package(
    lines: list[str], ends: list[str], last: bool
) -> None:
    text = "".join(line + end for line, end in zip(lines, ends, strict=False))
    if last and lines:
        text = text.rstrip("\r\n")
    assert header_fields(text) == _email(text)


def test_a_real_metadata() -> None:
    text = "Metadata-Version: 2.1\nName: nvidia-cublas\nVersion: 13.10.0.20\n\nName: body\n"
    assert header_fields(text) == {
        "metadata-version": "2.1", "name": "nvidia-cublas", "version": "13.10.0.20",
    }  # fmt: skip
