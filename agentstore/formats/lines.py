"""Reading a JSONL file one bounded line at a time: what every importer reads through.

    reader = LineReader(stream)                  # a binary stream; limit = line_limit()
    for number, line in reader:                  # 1-based numbers; bytes without the newline
        text = reader.text(number, line)         # UTF-8, or BadFile naming the line

Each line is read with ``readline(limit + 1)``: a line longer than the limit
raises :class:`~agentstore.exceptions.BadFile` naming its number after at most
``limit + 1`` bytes of it were read, never the whole line — so ``/dev/zero`` on
a pipe, or a file with no newline, cannot exhaust memory.

The limit is the one the API puts on a request body: Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB by default; Django's default when the
project sets it to ``None``), so a line carries at most what one request may.
The exporters keep their lines under it (docs/commands.md, "Files").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from django.conf import global_settings, settings

from agentstore.exceptions import BadFile

__all__ = ["LineReader", "line_limit"]


def line_limit() -> int:
    """The longest line (in bytes, without its newline) an import reads or an export writes."""
    value = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
    if value is None:
        # "No limit" for request bodies; a file line still needs one.
        value = global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return int(value)


class LineReader:
    """The lines of a binary stream, each at most ``limit`` bytes (see the module docstring).

    ``number`` is the number of the line last read; ``newline_at_end`` says
    whether it ended with a newline (a file's last line may not).
    """

    def __init__(self, stream: BinaryIO, limit: int | None = None) -> None:
        self.stream = stream
        self.limit = line_limit() if limit is None else limit
        self.number = 0
        self.newline_at_end = True

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self

    def __next__(self) -> tuple[int, bytes]:
        chunk = self.stream.readline(self.limit + 1)
        if not chunk:
            raise StopIteration
        self.number += 1
        self.newline_at_end = chunk.endswith(b"\n")
        if self.newline_at_end:
            return self.number, chunk[:-1]
        if len(chunk) > self.limit:
            raise BadFile(
                f"line {self.number} is longer than {self.limit} bytes "
                "(the DATA_UPLOAD_MAX_MEMORY_SIZE setting)",
                line=self.number,
            )
        return self.number, chunk

    @staticmethod
    def text(number: int, line: bytes) -> str:
        """``line`` decoded as UTF-8, or :class:`BadFile` naming line ``number``."""
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadFile(
                f"line {number} is not UTF-8 text (byte {exc.start + 1})", line=number
            ) from None

    def first(self) -> tuple[int, bytes] | None:
        """The first line that is not blank, or ``None`` when there is none (an empty file)."""
        for number, line in self:
            if line.strip():
                return number, line
        return None
