"""The evidence JSON writer: the same value as json.dumps, laid out to read, at C speed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate import jsonutil
from tests.work import python_lines

pytestmark = pytest.mark.unit

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
# Keys of one type per object (json.dumps sorts them, so mixed types cannot be compared).
_keys = st.text() | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none()
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | _keys.flatmap(
            lambda k: st.dictionaries(st.just(k) | st.from_type(type(k)), inner, max_size=4)
        )
    ),
    max_leaves=30,
)


@given(_values)
@settings(max_examples=300, deadline=None)
def test_any_document_is_the_json_value_json_dumps_gives(value: object) -> None:
    try:
        expected = json.loads(json.dumps(value, sort_keys=True))
    except TypeError:
        return  # keys json.dumps cannot sort or write: not a document we write
    text = jsonutil.dumps(value)
    assert text.endswith("\n")
    assert json.loads(text) == expected


def test_keys_json_cannot_write_are_refused_as_json_dumps_refuses() -> None:
    with pytest.raises(TypeError):
        jsonutil.dumps({("a", "b"): [{"x": 1}]})


def test_keys_are_sorted_and_a_listing_reads_one_entry_per_line() -> None:
    doc = {
        "version": 1,
        "artifact": {
            "path": "lib.so",
            "entries": [
                {"target": "sm_90", "kind": "SASS", "kernels": ["a", "b"]},
                {"target": "compute_90", "kind": "PTX", "kernels": []},
            ],
        },
    }
    assert jsonutil.dumps(doc) == (
        "{\n"
        '  "artifact": {\n'
        '    "entries": [\n'
        '      {"kernels": ["a", "b"], "kind": "SASS", "target": "sm_90"},\n'
        '      {"kernels": [], "kind": "PTX", "target": "compute_90"}\n'
        "    ],\n"
        '    "path": "lib.so"\n'
        "  },\n"
        '  "version": 1\n'
        "}\n"
    )


def test_a_large_listing_is_written_with_less_python_than_the_indenting_encoder() -> None:
    # torch's loaded libraries come to tens of thousands of entries per run record. Here
    # Python only decides the layout (~44 lines an entry) and the C encoder writes each
    # entry; json.dumps(indent=2) writes them in Python (~95 lines an entry).
    # benchmarks/bench_bounds.py times the two on 40,000 entries.
    entries: list[dict[str, Any]] = [
        {"kind": "SASS", "target": f"sm_{90 + i % 3}", "size": i, "ptx_isa": None, "kernels": []}
        for i in range(2_000)
    ]
    doc = {"version": 1, "libraries": [{"path": "libx.so", "entries": entries}]}
    with python_lines(limit=10_000_000) as ours:
        text = jsonutil.dumps(doc)
    with python_lines(limit=10_000_000) as theirs:
        json.dumps(doc, indent=2, sort_keys=True)
    assert json.loads(text) == doc
    assert ours.amount < theirs.amount / 2, (ours.amount, theirs.amount)
