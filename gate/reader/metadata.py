"""The header fields of a distribution's METADATA (RFC 822 style), as the email package reads them.

Not the email package itself: importing it (sockets, random, base64...) was 9 ms of
every ``inspect`` of an environment, a twelfth of its start-up; only Name and Version
are wanted.
"""

from __future__ import annotations

import re

# Header lines as the email package's feed parser tells them (its headerRE): a name
# and a colon, a folded line's leading blank, or a Unix "From " line.
_HEADER_LINE = re.compile(r"From |[\041-\071\073-\176]*:|[\t ]")
_LINE_END = re.compile(r"\r\n|\r|\n")


def header_fields(text: str) -> dict[str, str]:
    """The first value of each header of an RFC 822 style text (METADATA), by lower-case
    name, as ``email.parser.HeaderParser`` (policy compat32) gives them."""
    pieces = _LINE_END.split(text)
    ends = [*_LINE_END.findall(text), ""]
    fields: dict[str, str] = {}
    current: list[str] = []  # the header being read: its lines, each with its line end

    def done() -> None:
        if current:
            head, _, value = current[0].partition(":")
            joined = value.lstrip(" \t") + "".join(current[1:])
            fields.setdefault(head.lower(), joined.rstrip("\r\n"))

    for line, end in zip(pieces, ends, strict=True):
        if not line or not _HEADER_LINE.match(line):
            break  # the blank line, or the body starting without one
        if line[0] in " \t":
            if current:
                current.append(line + end)
            continue
        done()
        # A Unix "From " line and a line with no name before its colon are skipped
        # (and so is any folded line after them).
        named = not line.startswith("From ") and line.find(":") > 0
        current = [line + end] if named else []
    done()
    return fields
