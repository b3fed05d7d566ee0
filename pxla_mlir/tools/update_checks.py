"""Rewriting a lit test's generated CHECK blocks from what its RUN lines print now.

A test's RUN lines run as lit runs them (``lit_runs``). Each FileCheck that
reads the test itself is checked by one *generated prefix*: one of its
prefixes with no hand-written check line in the file, shared only by RUN lines
that print the same text. For every chunk (with ``--split-input-file[=MARKER]``,
else the whole file) the lines of those prefixes replace the chunk's block
between ``CHECK-GEN-BEGIN`` and ``CHECK-GEN-END``, or become a new block above
the chunk's input. Everything outside the blocks (RUN lines, hand-written
checks, comments, the input) is left as it is, byte for byte. An output can
name the test's lines (``file:LINE:COL`` of a diagnostic): when the new blocks
move lines, the RUN lines run again on the new text until the checks hold for
the file as written. The new text is checked with the RUN lines' own
FileCheck on the captured outputs; any error leaves the file as it was.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass

from pxla_mlir.mlir.cli import gen_checks
from pxla_mlir.mlir.cli.gen_checks import (
    DEFAULT_SPLIT_MARKER,
    Block,
    MarkerError,
    block,
    check_lines,
    find_blocks,
    lines_of,
)
from pxla_mlir.mlir.support.files import write_atomically
from pxla_mlir.tools import lit_runs

_RUN = re.compile(r"^\s*(\S*?)\s*RUN:")
_PREFIX = re.compile(r"[A-Za-z0-9_-]+")  # what LLVM's FileCheck takes
_SETTLE = 3  # reruns on the new text before line numbers that keep moving are an error


class UpdateError(Exception):
    """Why a test's generated checks cannot be rewritten: one line, with the test's line when known."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Update:
    path: str
    old: str
    new: str

    @property
    def stale(self) -> bool:
        return self.old != self.new


def _hand_written(lines: list[str], blocks: list[Block], prefixes: set[str]) -> set[str]:
    """The prefixes with a check line outside the generated blocks."""
    inside = {i for b in blocks for i in range(b.begin, b.end + 1)}
    found = set()
    for prefix in prefixes:
        directive = re.compile(rf"(?:^|[^A-Za-z0-9_-]){re.escape(prefix)}"
                               r"(?:-(?:DAG|COUNT-\d+|NOT|EMPTY|NEXT|SAME|LABEL))?(?:\{LITERAL\})?:")
        if any(directive.search(line) for i, line in enumerate(lines) if i not in inside):
            found.add(prefix)
    return found


def _choose_prefixes(captures: list[lit_runs.Capture], hand: set[str]) -> dict[str, list[lit_runs.Capture]]:
    """Generated prefix -> the captures it checks; every capture with a free prefix gets exactly one."""
    with_prefix = {}
    for c in captures:
        for p in c.parsed.prefixes:
            with_prefix.setdefault(p, []).append(c)
    chosen: dict[str, list[lit_runs.Capture]] = {}
    covered: dict[int, str] = {}  # id(capture) -> its generated prefix
    for c in captures:
        free = [p for p in c.parsed.prefixes if p not in hand]
        if not free or id(c) in covered:
            continue
        usable = [p for p in free if len({o.input for o in with_prefix[p]}) == 1
                  and not any(id(o) in covered for o in with_prefix[p])]
        if not usable:
            p = free[0]
            other = next((o for o in with_prefix[p] if o.input != c.input), None)
            if other is not None:
                why = f"prints other text than RUN line {other.run.line}, which also checks prefix {p}"
            else:
                other = next(o for o in with_prefix[p] if id(o) in covered)
                why = (f"shares prefix {p} with RUN line {other.run.line}, which is already checked by generated "
                       f"prefix {covered[id(other)]}")
            raise UpdateError(f"RUN line {c.run.line} {why}; give one of them a prefix of its own "
                              "(--check-prefixes=...)", c.run.line)
        best = max(usable, key=lambda p: (len(with_prefix[p]), -free.index(p)))
        chosen[best] = with_prefix[best]
        covered.update({id(o): best for o in with_prefix[best]})
    return chosen


def _split_markers(command: str) -> tuple[str | None, str]:
    """The markers a RUN line splits at, as pxla-opt and mlir-opt read them: its input's
    (``--split-input-file[=MARKER]``; None: no split) and its output's (``--output-split-marker``)."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: lit's shell would refuse the line first
        words = command.split()
    split, output = None, DEFAULT_SPLIT_MARKER
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in ("-split-input-file", "--split-input-file"):
            split = value if eq else DEFAULT_SPLIT_MARKER
        elif name in ("-output-split-marker", "--output-split-marker"):
            output = value if eq else words[i + 1] if i + 1 < len(words) else output
    return split, output


def _chunk_spans(lines: list[str], marker: str | None) -> list[tuple[int, int]]:
    """[start, end) line spans of the test's chunks (the marker lines belong to none)."""
    if marker is None:
        return [(0, len(lines))]
    spans, start = [], 0
    for i, line in enumerate(lines):
        if line.startswith(marker):
            spans.append((start, i))
            start = i + 1
    spans.append((start, len(lines)))
    return spans


def _insert_at(lines: list[str], start: int, end: int, comment: str) -> int:
    """Where a new block goes in a chunk: above its first line of input, or after its last line."""
    for i in range(start, end):
        if lines[i].strip() and not lines[i].lstrip().startswith(comment):
            return i
    last = max((i for i in range(start, end) if lines[i].strip()), default=start - 1)
    return last + 1


def _first_error(stderr: str) -> str:
    """FileCheck's message: its first line, or a traceback's last (the PyPI filecheck's usage errors)."""
    lines = [line.strip() for line in lines_of(stderr) if line.strip()]
    if not lines:
        return "no output on stderr"
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def _filecheck(c: lit_runs.Capture, command: list[str], check_file: str) -> subprocess.CompletedProcess:
    """The RUN line's FileCheck on its captured input, with ``check_file`` as the checks."""
    args = [check_file if i == c.parsed.check_index else a for i, a in enumerate(c.args)
            if i not in c.parsed.input_indices]
    return subprocess.run(command + args, input=c.input, capture_output=True, text=True,
                          errors="replace", cwd=c.cwd, timeout=300)


def _verify(path: str, new: str, captures: list[lit_runs.Capture], hand: set[str]) -> None:
    """Each FileCheck of a generated prefix passes on its captured input with the new text."""
    with tempfile.TemporaryDirectory(prefix="pxla-update-checks-") as tmp:
        checks, anything = os.path.join(tmp, os.path.basename(path)), os.path.join(tmp, "anything")
        with open(checks, "w", encoding="utf-8", newline="") as f:
            f.write(new)
        for c in captures:
            command = lit_runs.filecheck_command(c)
            if command is None:
                hint = f"; {lit_runs.INSTALL_HINT}" if c.filecheck == "filecheck" else ""
                raise UpdateError(f"RUN line {c.run.line}: FileCheck '{c.filecheck}' is not on PATH{hint}", c.run.line)
            parsed = c.parsed
            done = _filecheck(c, command, checks)
            if done.returncode == 0:
                continue
            why = _first_error(done.stderr.replace(checks, path))
            with open(anything, "w") as f:  # checks that pass on any output: failing them is the options' fault
                f.write("".join(f"{p}: {{{{.*}}}}\n" for p in parsed.prefixes))
            if _filecheck(c, command, anything).returncode != 0:
                raise UpdateError(f"RUN line {c.run.line}: its FileCheck fails whatever the checks ({why}): fix the "
                                  "FileCheck options on the RUN line; the test is unchanged", c.run.line)
            mixed = sorted(hand & set(parsed.prefixes))
            hint = (f"its hand-written {', '.join(mixed)} checks may not fit between the generated CHECK-LABELs; "
                    "give the generated prefix a RUN line of its own" if mixed else
                    "the generated checks do not fit this FileCheck's options")
            raise UpdateError(f"the new checks would fail RUN line {c.run.line} ({why}): {hint}; "
                              "the test is unchanged", c.run.line)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except OSError as e:
        raise UpdateError(f"cannot read the test: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UpdateError(f"the test is not UTF-8 (byte {e.object[e.start]:#04x} at offset {e.start}); save it as "
                          "UTF-8") from None


def _check_prefixes(captures: list[lit_runs.Capture]) -> None:
    """Prefixes LLVM's FileCheck would refuse, before any check is written with them."""
    for c in captures:
        prefixes = c.parsed.prefixes
        bad = next((p for p in prefixes if not _PREFIX.fullmatch(p)), None)
        twice = next((p for p in prefixes if prefixes.count(p) > 1), None)
        if bad is not None or twice is not None:
            what = (f"the check prefix {bad!r} is not letters, digits, '-' and '_'" if bad is not None else
                    f"the check prefix {twice} is named twice")
            raise UpdateError(f"RUN line {c.run.line}: FileCheck rejects its options: {what}; fix "
                              "--check-prefix(es) on the RUN line", c.run.line)


def _rewrite(path: str, text: str) -> tuple[str, bool, list[lit_runs.Capture], set[str]]:
    """``text`` (the test as it is on disk) with its blocks rewritten from what its RUN lines print
    now; whether that moves lines outside the blocks; the captures of the generated prefixes and
    the hand-written prefixes."""
    lines = lines_of(text)  # a '\r' stays on its line: CRLF and LF lines are kept as they are
    try:
        blocks = find_blocks(lines)
    except MarkerError as e:
        raise UpdateError(str(e), e.line) from None
    try:
        runs, captures, places = lit_runs.capture(path)
    except lit_runs.RunError as e:
        raise UpdateError(str(e), e.line) from None
    own = [c for c in captures if c.checks(path)]
    if not own:
        raise UpdateError("no RUN line pipes into a FileCheck of this test (e.g. '... | filecheck %s')", runs[0].line)
    _check_prefixes(own)
    first_run = lines[runs[0].line - 1]
    run_line = _RUN.match(first_run)  # lit_runs found a RUN line there
    comment = (run_line.group(1) if run_line is not None else None) or "//"
    hand = _hand_written(lines, blocks, {p for c in own for p in c.parsed.prefixes})
    chosen = _choose_prefixes(own, hand)
    if not chosen:
        raise UpdateError(f"every prefix the RUN lines check ({', '.join(sorted(hand))}) has hand-written checks; "
                          "add a RUN line with a prefix of its own (e.g. '| filecheck %s --check-prefix=GEN')",
                          own[0].run.line)

    for cs in chosen.values():  # LLVM's FileCheck rejects a prefix without check lines
        for c in cs:
            unused = [p for p in c.parsed.prefixes if p not in hand and p not in chosen]
            if unused and not any(a.lstrip("-").startswith("allow-unused-prefixes") for a in c.args):
                raise UpdateError(f"RUN line {c.run.line} checks prefix {unused[0]}, which would have no check line "
                                  "(LLVM's FileCheck rejects that): drop it from the RUN line or write checks for it",
                                  c.run.line)

    markers = {p: _split_markers(cs[0].run.command) for p, cs in chosen.items()}
    splits = sorted({split for split, _ in markers.values() if split is not None})
    if len(splits) > 1:
        raise UpdateError(f"the RUN lines split the test at different markers ({', '.join(map(repr, splits))}); "
                          "give them one --split-input-file", runs[0].line)
    marker = splits[0] if splits else None
    spans = _chunk_spans(lines, marker)
    for b in blocks:
        if not any(start <= b.begin and b.end < end for start, end in spans):
            raise UpdateError(f"the generated block from line {b.begin + 1} spans a '{marker}' line", b.begin + 1)
    generated: list[list[str]] = [[] for _ in spans]
    for prefix, cs in chosen.items():
        run = cs[0].run
        split, output_marker = markers[prefix]
        outputs = gen_checks.split_chunks(cs[0].input, output_marker) if split is not None else [cs[0].input]
        if len(outputs) != len(spans):
            raise UpdateError(f"RUN line {run.line} prints {len(outputs)} chunk(s) for the test's {len(spans)} "
                              f"('{marker}'); every chunk must print its output (a chunk that fails prints nothing)",
                              run.line)
        for k, (output, (start, _)) in enumerate(zip(outputs, spans)):
            checks = check_lines(output, prefix, comment=comment, elide=places)
            if not checks:
                where = f"chunk {k + 1} (from line {start + 1})" if len(spans) > 1 else "the test"
                raise UpdateError(f"RUN line {run.line} prints nothing for {where}: no checks to generate",
                                  start + 1)
            generated[k] += ([comment] if generated[k] else []) + checks

    cr = "\r" if 2 * sum(line.endswith("\r") for line in lines) > len(lines) else ""  # new lines end as most do
    edits = []  # (start, end, lines), applied from the last
    for (start, end), checks in zip(spans, generated):
        new_block = [line + cr for line in block(checks, comment)]
        mine = [b for b in blocks if start <= b.begin < end]
        if len(mine) > 1:
            raise UpdateError(f"two generated blocks in one chunk (lines {mine[0].begin + 1} and {mine[1].begin + 1})",
                              mine[1].begin + 1)
        if mine:
            edits.append((mine[0].begin, mine[0].end + 1, new_block))
        else:
            at = _insert_at(lines, start, end, comment)
            before = [cr] if at > start and lines[at - 1].strip() and at == end else []
            edits.append((at, at, before + new_block + ([] if at == end else [cr])))
    new_lines = list(lines)
    for start, end, replacement in sorted(edits, reverse=True):
        new_lines[start:end] = replacement
    new = "\n".join(new_lines) + ("\n" if text.endswith("\n") or not text else "")
    moved = any(len(replacement) != end - start for start, end, replacement in edits)
    return new, moved, [c for cs in chosen.values() for c in cs], hand


def update(path: str, *, verify: bool = True) -> Update:
    """The test's text with its generated blocks rewritten; the file is left as it was.

    ``verify``: make sure the new text passes as it will be written. When it moves lines (which
    an output may name, as diagnostics do), it is written for a while, the RUN lines run again on
    it, and the old text is put back; then the RUN lines' FileCheck checks it. Without
    (``--check``): the first rewrite, which differs from the test exactly when it is stale.
    """
    old = _read(path)
    new, moved, own, hand = _rewrite(path, old)
    if not verify or new == old:
        return Update(path, old, new)
    reruns = 0
    try:
        while moved:
            if reruns == _SETTLE:
                raise UpdateError(f"the RUN lines print other text each time the generated blocks are rewritten "
                                  f"({_SETTLE} times): their output must not depend on the checks; the test is "
                                  "unchanged")
            _replace(path, new)
            reruns += 1
            new, moved, own, hand = _rewrite(path, new)
    finally:
        if reruns:
            _replace(path, old)
    _verify(path, new, own, hand)
    return Update(path, old, new)


def _replace(path: str, text: str) -> None:
    """Replaces the test's text in one step (a reader sees the old text or the new); through a
    symbolic link, its target's, so that the link stays a link."""
    try:
        write_atomically(path, text)
    except OSError as e:
        raise UpdateError(f"cannot write the test: {e.strerror}") from None


def write(result: Update) -> None:
    _replace(result.path, result.new)


def tests_with_blocks(directory: str) -> list[str]:
    """Files under ``directory`` that hold a generated block (lit's Output/ folders skipped)."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in ("Output", "__pycache__") and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    if any(gen_checks.is_begin_marker(line) for line in lines_of(f.read())):
                        found.append(path)
            except (OSError, UnicodeDecodeError):
                continue
    return found
