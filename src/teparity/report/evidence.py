"""A failure's evidence cut to the report's size without losing why it failed: the JSON report, ``teparity summary``
and the job summary read this excerpt, not the terminal's whole message. A long multi-rank failure keeps its first
line, and for each rank its block's header, the exception line of every traceback in it (type and message), and the
block's end (the frames nearest the raise, the re-run line); any other long message keeps its head, its exception
lines and its end."""

from __future__ import annotations

import re

from teparity.launch.outcome import RANK_BLOCK

#: The most characters of one failure's evidence in the report.
EVIDENCE_CHARS = 2000
#: The most characters kept of one exception line (a message can be a whole dump).
EXCEPTION_LINE_CHARS = 300
_TRACEBACK = re.compile(r"^(?P<indent>[ \t]*)Traceback \(most recent call last\):$")


def excerpt(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """``text`` where it fits in ``limit`` characters; else its first line, then per rank block the block's header, its
    exception lines and as much of its end as fits; where it names no rank, its exception lines, head and end."""
    if len(text) <= limit:
        return text
    first, _, rest = text.partition("\n")
    first = _clip(first, limit // 4)
    blocks = _blocks(rest)
    share = (limit - len(first) - 1) // len(blocks) - 1
    return "\n".join([first, *(_block_excerpt(header, body, share) for header, body in blocks)])


def exception_lines(text: str) -> list[str]:
    """The first line of each traceback's exception in ``text`` (``RuntimeError: ...``), in order: the line after a
    ``Traceback`` header's frames, at that header's indentation."""
    found: list[str] = []
    indent: str | None = None
    for line in text.splitlines():
        if (match := _TRACEBACK.match(line)) is not None:
            indent = match["indent"]
        elif indent is not None and line.startswith(indent) and line[len(indent):][:1] not in ("", " ", "\t"):
            found.append(line.strip())
            indent = None
    return found


def _blocks(rest: str) -> list[tuple[str, str]]:
    """``rest`` as (header, body) per rank block (``RANK_BLOCK``); text before the first block is a block without a
    header."""
    starts = [match.start() for match in RANK_BLOCK.finditer(rest)]
    if not starts:
        return [("", rest)]
    pieces = ([rest[: starts[0]]] if starts[0] else []) + [rest[a:b] for a, b in zip(starts, [*starts[1:], len(rest)])]
    return [piece.partition("\n")[::2] if RANK_BLOCK.match(piece) else ("", piece) for piece in pieces]


def _block_excerpt(header: str, body: str, share: int) -> str:
    """A rank's block: its header, exception lines and end; text that names no rank: its exception lines, head and
    end."""
    head = f"{_clip(header, share // 3)}\n" if header else ""
    body = body.strip("\n")
    if len(head) + len(body) <= share:
        return head + body
    # A chain of exceptions: the last ones, nearest the raise.
    why = list(dict.fromkeys(_clip(line, EXCEPTION_LINE_CHARS) for line in exception_lines(body)))[-3:]
    marker = "[... {} characters cut ...]"
    room = share - len(head) - sum(len(line) + 1 for line in why) - len(marker) - 8
    start = "" if header or room <= 0 else body[: room // 2].rpartition("\n")[0]
    tail = body[len(body) - (room - len(start)):] if room > len(start) else ""
    if "\n" in tail[:-1]:  # from a whole line on
        tail = tail.partition("\n")[2]
    why = [line for line in why if line not in start and line not in tail]
    return head + "\n".join([*why, *([start] if start else []), marker.format(len(body) - len(start) - len(tail)), tail])


def _clip(line: str, most: int) -> str:
    return line if len(line) <= most else line[: max(most - 3, 0)] + "..."
