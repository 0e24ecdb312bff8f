"""A reader for the small part of TOML the preflight's data files use, for Pythons before 3.11 (no tomllib).
 The preflight runs before any virtual environment exists, under whatever `python3` the host has (Ubuntu 20.04:
3.8). It reads harness/preflight/*.toml with tomllib where there is one, and with this otherwise. Supported:
`[table.sub]` headers (bare or "quoted" keys), `key = value` lines, basic and literal strings, integers, floats,
booleans, and arrays of those (over several lines, trailing comma, comments). Anything else is an error naming
the line, so a data file that outgrows this reader fails loudly. tests/test_preflight.py checks that it reads
every data file exactly as tomllib does.
"""

from __future__ import annotations

import re
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_NUMBER = re.compile(r"[+-]?(\d[\d_]*)(\.\d+)?([eE][+-]?\d+)?")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class TomlError(ValueError):
    pass


def loads(text: str) -> dict[str, Any]:
    root: dict[str, Any] = {}
    table = root
    reader = _Reader(text)
    while not reader.done():
        reader.skip_blank()
        if reader.done():
            break
        if reader.peek() == "[":
            reader.pos += 1
            path = reader.key_path("]")
            reader.expect("]")
            table = root
            for part in path:
                table = table.setdefault(part, {})
                if not isinstance(table, dict):
                    raise reader.error(f"[{'.'.join(path)}] redefines a value")
        else:
            key = reader.key_path("=")
            if len(key) != 1:
                raise reader.error("dotted keys are not supported")
            reader.expect("=")
            if key[0] in table:
                raise reader.error(f"duplicate key {key[0]!r}")
            table[key[0]] = reader.value()
        reader.end_of_line()
    return root


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def done(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def error(self, what: str) -> TomlError:
        line = self.text.count("\n", 0, self.pos) + 1
        return TomlError(f"line {line}: {what}")

    def spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def skip_blank(self) -> None:
        """Spaces, newlines and comments."""
        while not self.done():
            c = self.peek()
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#":
                while not self.done() and self.peek() != "\n":
                    self.pos += 1
            else:
                return

    def expect(self, c: str) -> None:
        self.spaces()
        if self.peek() != c:
            raise self.error(f"expected {c!r}")
        self.pos += 1

    def end_of_line(self) -> None:
        self.spaces()
        if self.peek() == "#":
            while not self.done() and self.peek() != "\n":
                self.pos += 1
        if self.peek() == "\r":
            self.pos += 1
        if not self.done() and self.peek() != "\n":
            raise self.error("unexpected text after the value")

    def key_path(self, end: str) -> list[str]:
        parts = []
        while True:
            self.spaces()
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                m = _BARE.match(self.text, self.pos)
                if not m:
                    raise self.error("expected a key")
                parts.append(m.group())
                self.pos = m.end()
            self.spaces()
            if self.peek() == ".":
                self.pos += 1
                continue
            if self.peek() != end:
                raise self.error(f"expected {end!r} after the key")
            return parts

    def value(self) -> Any:
        self.spaces()
        c = self.peek()
        if c in ('"', "'"):
            return self.string()
        if c == "[":
            return self.array()
        for word, val in (("true", True), ("false", False)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        m = _NUMBER.match(self.text, self.pos)
        if m and m.end() > self.pos:
            self.pos = m.end()
            raw = m.group().replace("_", "")
            return float(raw) if (m.group(2) or m.group(3)) else int(raw)
        raise self.error("unsupported value (strings, numbers, booleans and arrays only)")

    def array(self) -> list[Any]:
        self.pos += 1
        items = []
        while True:
            self.skip_blank()
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value())
            self.skip_blank()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise self.error("expected ',' or ']' in an array")

    def string(self) -> str:
        quote = self.peek()
        if self.text.startswith(quote * 3, self.pos):
            raise self.error("multi-line strings are not supported")
        self.pos += 1
        out = []
        while True:
            c = self.peek()
            if c in ("", "\n"):
                raise self.error("unterminated string")
            self.pos += 1
            if c == quote:
                return "".join(out)
            if c == "\\" and quote == '"':
                e = self.peek()
                self.pos += 1
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                elif e in ("u", "U"):
                    n = 4 if e == "u" else 8
                    out.append(chr(int(self.text[self.pos:self.pos + n], 16)))
                    self.pos += n
                else:
                    raise self.error(f"unknown escape \\{e}")
            else:
                out.append(c)
