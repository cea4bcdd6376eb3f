"""The evidence JSON writer: the same value as json.dumps, laid out to read, at C speed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate import jsonutil

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


def test_a_large_listing_is_written_faster_than_the_indenting_encoder() -> None:
    # torch's loaded libraries come to tens of thousands of entries per run record.
    entries: list[dict[str, Any]] = [
        {"kind": "SASS", "target": f"sm_{90 + i % 3}", "size": i, "ptx_isa": None, "kernels": []}
        for i in range(40_000)
    ]
    doc = {"version": 1, "libraries": [{"path": "libx.so", "entries": entries}]}

    def best(write: object) -> float:
        times = []
        for _ in range(3):
            began = time.perf_counter()
            write(doc)  # type: ignore[operator]
            times.append(time.perf_counter() - began)
        return min(times)

    ours = best(jsonutil.dumps)
    theirs = best(lambda d: json.dumps(d, indent=2, sort_keys=True))
    assert json.loads(jsonutil.dumps(doc)) == doc
    assert ours < theirs * 0.9, f"{ours:.3f} s vs json.dumps(indent=2) {theirs:.3f} s"
