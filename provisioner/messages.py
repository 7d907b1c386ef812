"""Validation messages: ``file:line: field.path: message`` (SPEC JSON shape ``Message``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

Level = Literal["error", "warning"]


class MessageDoc(TypedDict):
    """``Message.to_json``: the SPEC JSON shape ``Message`` (``Message(**doc)`` reads it back)."""

    file: str | None
    line: int | None
    path: str
    message: str
    level: Level
    source: str | None


@dataclass(frozen=True, slots=True)
class Message:
    path: str
    message: str
    level: Level = "error"
    file: str | None = None
    line: int | None = None
    source: str | None = None

    def render(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        field = f"{self.path}: " if self.path else ""
        src = f" ({self.source})" if self.source else ""
        return f"{where}{field}{self.message}{src}"

    def to_json(self) -> MessageDoc:
        return {
            "file": self.file,
            "line": self.line,
            "path": self.path,
            "message": self.message,
            "level": self.level,
            "source": self.source,
        }

    def located(self, file: str | None, line: int | None) -> Message:
        return Message(self.path, self.message, self.level, file, line, self.source)
