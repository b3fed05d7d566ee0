"""The syntax of textual pass pipelines: the tree of
``builtin.module(pass{options},anchor(pass,...),...)`` as written, before any
name is looked up (:mod:`.pipeline` resolves it), and the located error for
text that does not parse."""

from __future__ import annotations

import dataclasses
import re

from pxla_mlir.errors import PxlaUserError

__all__ = ["MAX_PIPELINE_DEPTH", "ROOT_ANCHOR", "Element", "Parser", "PipelineSyntaxError", "pass_element",
           "source_text", "walk"]

_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
ROOT_ANCHOR = "builtin.module"
#: Deepest nesting of anchors like ``func.func(...)`` (real pipelines use 2 or 3).
MAX_PIPELINE_DEPTH = 64


class PipelineSyntaxError(PxlaUserError, ValueError):
    """A pipeline that cannot be parsed or refers to unknown passes/options."""

    def __init__(self, message: str, text: str, col: int):
        self.message, self.text, self.col = message, text, col
        super().__init__(self.format())

    def format(self) -> str:
        text, col = self.text, self.col
        if len(text) > 160:  # a window around the column, not the whole line
            start = max(0, col - 80)
            text = ("..." if start else "") + text[start:col + 80] + ("..." if col + 80 < len(text) else "")
            col = col - start + (3 if start else 0)
        return f"<pass-pipeline>:1:{self.col + 1}: error: {self.message}\n{text}\n{' ' * col}^"


@dataclasses.dataclass(frozen=True)
class Element:
    name: str
    col: int
    options: str | None = None  # text inside {...}
    children: tuple[Element, ...] | None = None  # nested anchor: name(...)


class Parser:
    def __init__(self, text: str):
        self.text, self.pos, self.depth = text, 0, 0

    def error(self, msg: str, col: int | None = None) -> PipelineSyntaxError:
        return PipelineSyntaxError(msg, self.text, self.pos if col is None else col)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            got = repr(self.peek()) if self.peek() else "end of pipeline"
            raise self.error(f"expected '{ch}', got {got}")
        self.pos += 1

    def element(self) -> Element:
        self.skip_ws()
        col = self.pos
        m = _NAME.match(self.text, self.pos)
        if not m:
            raise self.error("expected a pass or pipeline name")
        self.pos = m.end()
        if self.peek() == "{":
            start = self.pos + 1
            depth, quote = 0, None
            while self.pos < len(self.text):
                ch = self.text[self.pos]
                self.pos += 1
                if quote:  # a quoted value may hold braces
                    quote = None if ch == quote else quote
                    continue
                if ch in "\"'" and depth >= 1:
                    quote = ch
                depth += (ch == "{") - (ch == "}")
                if depth == 0:
                    return Element(m.group(0), col, options=self.text[start:self.pos - 1])
            raise self.error("unbalanced '{' in pass options", col)
        if self.peek() == "(":
            self.depth += 1
            if self.depth > MAX_PIPELINE_DEPTH:
                raise self.error(f"the pipeline nests more than {MAX_PIPELINE_DEPTH} levels of '(...)'", col)
            self.pos += 1
            children = self.elements()
            self.expect(")")
            self.depth -= 1
            return Element(m.group(0), col, children=children)
        return Element(m.group(0), col)

    def elements(self) -> tuple[Element, ...]:
        out = []
        if self.peek() == ")":
            return ()
        while True:
            out.append(self.element())
            if self.peek() != ",":
                return tuple(out)
            self.pos += 1

    def parse(self) -> Element:
        root = self.element()
        if self.peek():
            raise self.error(f"unexpected {self.peek()!r} after the pipeline")
        if root.children is None or root.name != ROOT_ANCHOR:
            raise self.error(f"the pipeline must be anchored on '{ROOT_ANCHOR}(...)', "
                             f"e.g. '{ROOT_ANCHOR}({self.text.strip()})'", root.col)
        return root


def pass_element(name: str, options: str) -> str:
    """``name{options}``, the pipeline element of options given apart from a pipeline (a pass flag's value).

    Option text is a value: a brace in it that would close the element early
    (``max-iterations=3},cse,canonicalize{``) or leave it open would make the
    rest of it pipeline text, so it raises :class:`PipelineSyntaxError`."""
    text = f"{name}{{{options}}}"
    parser = Parser(text)
    try:
        element = parser.element()
    except PipelineSyntaxError:
        raise PipelineSyntaxError(f"the options of '{name}' open a '{{' they do not close", text,
                                  len(text) - 1) from None
    if element.options != options or parser.peek():
        closing = len(name) + 1 + len(element.options or "")
        raise PipelineSyntaxError(f"this '}}' in the options of '{name}' would end them and make the rest passes; "
                                  f"an option value cannot hold an unopened '}}'", text, closing)
    return text


def walk(el: Element):
    for c in el.children or ():
        yield c
        yield from walk(c)


def source_text(el: Element) -> str:
    if el.children is not None:
        return f"{el.name}({','.join(source_text(c) for c in el.children)})"
    return el.name + (f"{{{el.options}}}" if el.options is not None else "")
