"""A seeded fuzzer for pxla-opt: mutated .mlir files of this repository and bad pipelines.

Every case must end with exit status 0, or 1 (the input) or 2 (the pipeline)
with a located ``error:`` (``file:line:col: error: ...``): never a signal, a hang, a Python traceback
or an "internal error". Cases run in worker processes that call
``pxla_opt.main`` in-process, many per process (tests/fuzzing/workers.py); a
worker that dies is replaced and the case it was running is reported.

    python tests/fuzzing/opt_fuzz.py --cases 5000 --seed 1      # what `make fuzz` runs
    python tests/fuzzing/opt_fuzz.py --replay 1:1234            # rerun one case, print it
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import functools
import io
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile

if __package__ in (None, ""):  # run as a script: make `fuzzing` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from fuzzing import workers

REPO = pathlib.Path(__file__).resolve().parents[2]
LOCATED_ERROR = re.compile(r"^\S.*:\d+:\d+: error: ", re.M)
BAD_OUTPUT = ("Traceback", "internal error")

# -- corpus ------------------------------------------------------------------------------


def corpus() -> list[str]:
    """Every ``// -----`` chunk of the repository's .mlir files."""
    files = sorted(p for d in ("test/lit", "examples") for p in (REPO / d).rglob("*.mlir") if "Output" not in p.parts)
    chunks = []
    for path in files:
        chunks += [c for c in re.split(r"^// -----.*$", path.read_text(), flags=re.M) if "module" in c or "func" in c]
    return chunks


PASSES = ("pxla-annotate-shardings", "pxla-convert-to-replica-mode", "pxla-expand-manual-sharding",
          "pxla-expand-shard", "pxla-expand-unshard", "pxla-expand-unshard{strategy=all-reduce}",
          "pxla-fold-shard-of-unshard", "pxla-verify-handoff", "pxla-verify-handoff{num-replicas=8}",
          "pxla-wrap-manual-main", "pxla-handoff-pipeline", "pxla-handoff-pipeline{mode=partition}",
          "pxla-pmap-pipeline", "pxla-pmap-pipeline{mode=partition unshard=all-reduce}",
          "pxla-xmap-pipeline{lowering=manual}", "pxla-xmap-pipeline{lowering=vectorize}",
          "canonicalize", "cse", "func.func(cse)", "symbol-dce", "stablehlo-legalize-to-hlo")

# Values of the wrong kind or out of range, for any attribute.
WRONG_VALUES = ('"8"', '""', "unit", "1.5 : f32", "{a = 1}", "@sym", '[["nope"]]', "[]", "true", "false",
                "4294967296 : i64", "0 : i64", "-1 : i64", "-9223372036854775808 : i64",
                "9223372036854775807 : i64", "2147483648 : i32", "0 : i32", "dense<1> : tensor<2xi64>",
                "dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>", "dense<[[0, 9]]> : tensor<1x2xi64>",
                "dense<> : tensor<0x2xi64>", "array<i64: 1, 2>", "#mhlo.channel_handle<handle = 0, type = 0>",
                '"x=0"', '"x=4294967296"', '"x=2,x=2"', '"?"', '["x", ["y"]]', '[["x"], ["x"]]', "[[], [], []]",
                "@pxla.shard", "@pxla.unshard", "@Sharding", "@SPMDFullToShardShape", "unit, other = 1")
EXTREME_INTS = ("0", "-1", "1", "7", "2147483647", "2147483648", "4294967296", "9223372036854775807",
                "18446744073709551616", "99999999999999999999999")
# An attribute inside {...}: name = value up to the next top-level ',' or '}'.
_ATTR = re.compile(r"(?:(?<=\{)|(?<=, ))([\w.]+)( = )([^,{}\[\]]+|\[[^\]]*\]|\[\[[^\]]*\]\]|\{[^}]*\})")
_INT = re.compile(r"(?<![\w.%#])\d+(?![\w.])")


def mutate_text(rng: random.Random, text: str) -> str:
    for _ in range(rng.choices((1, 2, 3), (7, 2, 1))[0]):
        text = rng.choices(_MUTATORS, _WEIGHTS)[0](rng, text)
    return text


def _attr_value(rng, text):
    spans = list(_ATTR.finditer(text))
    if not spans:
        return text
    m = rng.choice(spans)
    value = rng.choice(WRONG_VALUES)
    if value == "unit":  # a unit attribute: the name alone
        return text[:m.start(2)] + text[m.end(3):]
    return text[:m.start(3)] + value + text[m.end(3):]


# Attributes the passes read; inserted with wrong-kind values where they are not expected.
READ_ATTRS = ("pxla.mesh", "pxla.dims", "pxla.tile_dims", "pxla.sharding_spec", "pxla.manual_axes", "pxla.axis",
              "pxla.axis_size", "pxla.stride", "pxla.axis_name", "mhlo.num_replicas", "mhlo.num_partitions",
              "mhlo.sharding", "channel_handle", "use_global_device_ids", "replica_groups", "source_target_pairs",
              "call_target_name", "backend_config", "sym_name", "sym_visibility")


def _insert_attr(rng, text):
    """A read attribute with a random value, into an attribute dictionary or onto an argument."""
    name, value = rng.choice(READ_ATTRS), rng.choice(WRONG_VALUES + ('"{replicated}"', '"{manual}"', "8 : i64"))
    item = name if value == "unit" else f"{name} = {value}"
    spots = [m.start(1) for m in _ATTR.finditer(text)]
    args = [m.end() for m in re.finditer(r"%\w+: tensor<[^>]*>(?= *[,)])", text)]
    if args and (not spots or rng.random() < 0.4):
        at = rng.choice(args)
        return text[:at] + f" {{{item}}}" + text[at:]
    if not spots:
        return text
    at = rng.choice(spots)
    return text[:at] + item + ", " + text[at:]


def _int(rng, text):
    spans = list(_INT.finditer(text))
    if not spans:
        return text
    m = rng.choice(spans)
    return text[:m.start()] + rng.choice(EXTREME_INTS) + text[m.end():]


def _swap_attr_values(rng, text):
    spans = list(_ATTR.finditer(text))
    if len(spans) < 2:
        return text
    a, b = sorted(rng.sample(spans, 2), key=lambda m: m.start())
    return text[:a.start(3)] + b.group(3) + text[a.end(3):b.start(3)] + a.group(3) + text[b.end(3):]


def _deep(rng, text):
    from pxla_mlir.mlir.core.nesting_depth import MAX_NESTING

    n = rng.choice((MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 4000, 20000))
    opener, closer = rng.choice((("[", "]"), ("module {", "}"), ("(", ")"), ("<", ">"), ("{a = ", "}"), ("- ", "")))
    at = rng.randrange(len(text) + 1)
    return text[:at] + opener * n + rng.choice(("", "1", "x")) + closer * rng.choice((n, 0, n // 2)) + text[at:]


def _delete_span(rng, text):
    if not text:
        return text
    a = rng.randrange(len(text))
    return text[:a] + text[a + rng.randint(1, 40):]


def _duplicate_line(rng, text):
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    i = rng.randrange(len(lines))
    return "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])


def _swap_lines(rng, text):
    lines = text.splitlines(keepends=True)
    if len(lines) < 2:
        return text
    i, j = rng.sample(range(len(lines)), 2)
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def _byte(rng, text):
    if not text:
        return text
    at = rng.randrange(len(text))
    return text[:at] + rng.choice('{}[]()<>"%@#^:,=-\\\x00\xff\n ') + text[at + rng.randint(0, 1):]


def _truncate(rng, text):
    return text[:rng.randrange(len(text) + 1)]


def _split_marker(rng, text):
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(("\n// -----\n", "// -----", "\n// ----- x\n", "\n//-----\n")) + text[at:]


def _placeholder_target(rng, text):
    targets = ("pxla.shard", "pxla.unshard", "pxla.full_to_shard", "pxla.shard_to_full", "Sharding",
               "SPMDFullToShardShape", "pxla.other")
    return re.sub(r"@(pxla\.\w+|Sharding|SPMD\w+)", lambda m: "@" + rng.choice(targets), text, count=1)


# Mostly mutations that keep the text parseable, so that the passes see it.
_MUTATORS, _WEIGHTS = zip((_attr_value, 4), (_insert_attr, 6), (_int, 3), (_swap_attr_values, 1), (_deep, 1),
                          (_delete_span, 1), (_duplicate_line, 1), (_swap_lines, 1), (_byte, 1), (_truncate, 0.5),
                          (_split_marker, 1), (_placeholder_target, 1))

# -- bad pipelines ------------------------------------------------------------------------


def pipeline(rng: random.Random) -> str:
    elements = [rng.choice(PASSES) for _ in range(rng.randint(1, 3))]
    text = f"builtin.module({','.join(elements)})"
    if rng.random() < 0.2:
        text = rng.choice(_PIPELINE_MUTATORS)(rng, text)
    return text


def _pipe_char(rng, text):
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice("(){},;= \t\n\"'{}[]é\x00") + text[at + rng.randint(0, 1):]


def _pipe_nest(rng, text):
    n = rng.choice((2, 63, 64, 65, 500, 3000))
    anchor = rng.choice(("func.func", "builtin.module", "pxla-verify-handoff"))
    return "builtin.module(" + f"{anchor}(" * n + "cse" + ")" * rng.choice((n, n - 1, n + 1)) + ")"


def _pipe_option(rng, text):
    name = rng.choice(("pxla-verify-handoff", "pxla-expand-unshard", "pxla-pmap-pipeline", "canonicalize", "cse"))
    opts = rng.choice(("{num-replicas=-1}", "{num-replicas=99999999999999999999}", "{num-replicas=0x10}",
                       "{strategy=}", "{strategy=all-gather strategy=all-reduce}", "{mode=spmd}", "{mode}",
                       "{unshard=all-reduce,all-gather}", "{ }", "{=}", "{{}}", "{top-down=maybe}",
                       "{max-iterations=-5}", "{num_replicas=1}"))
    return f"builtin.module({name}{opts})"


def _pipe_garbage(rng, text):
    return rng.choice(("", "builtin.module", "builtin.module(", "builtin.module()x", "func.func(cse)",
                       "builtin.module(,)", "builtin.module(cse,,cse)", "builtin.module(cse;cse)",
                       "builtin.module(pxla-nope)", "builtin.module(func.func(pxla-verify-handoff))",
                       "builtin.module(builtin.module(pxla-expand-shard))", "  builtin.module ( cse )  ",
                       "builtin.module(cse)" * 2, "builtin.module(" + "cse," * 500 + "cse)"))


_PIPELINE_MUTATORS = (_pipe_char, _pipe_nest, _pipe_option, _pipe_garbage)

# -- cases ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    text: str
    argv: list[str]  # pxla-opt arguments after the input file


@functools.cache
def _chunks() -> tuple[str, ...]:
    return tuple(corpus())


def make_case(seed: int, index: int) -> Case:
    rng = random.Random(f"{seed}:{index}")
    text = mutate_text(rng, rng.choice(_chunks()))
    argv = [f"--pass-pipeline={pipeline(rng)}"]
    for flag, p in (("--split-input-file", 0.3), ("--verify-diagnostics", 0.2), ("--allow-unregistered-dialect", 0.1),
                    ("--mlir-print-op-generic", 0.1)):
        if rng.random() < p:
            argv.append(flag)
    return Case(text, argv)


def problem(rc: int, err: str) -> str | None:
    """What is wrong with a finished run of pxla-opt, or None."""
    if rc < 0:
        return f"killed by signal {-rc}"
    if rc not in (0, 1, 2):  # 2: a mistake in the pipeline, a command-line argument
        return f"exit status {rc}"
    for bad in BAD_OUTPUT:
        if bad in err:
            return f"{bad!r} on stderr"
    if rc != 0 and not LOCATED_ERROR.search(err):
        return f"exit {rc} without a located 'file:line:col: error:'"
    if re.search(r":0:0: |\(at line 0\)", err):
        return "a diagnostic at line 0"
    return None


def check(seed: int, index: int) -> tuple[str, str | None, str]:
    """Runs one case with ``pxla_opt.main`` in this process (see workers.py)."""
    from pxla_mlir.mlir.cli import pxla_opt

    case = make_case(seed, index)
    src = pathlib.Path(tempfile.gettempdir()) / f"pxla_fuzz_{os.getpid()}.mlir"
    src.write_bytes(case.text.encode("utf-8", "surrogateescape"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = pxla_opt.main([str(src), *case.argv, "-o", os.devnull])
    finally:
        src.unlink(missing_ok=True)
    text = err.getvalue()
    return ("exit 0" if rc == 0 else f"exit {rc}, located error"), problem(rc, text), text


def first_errors(report: workers.Report) -> collections.Counter:
    """The first error message of each case, numbers and quoted names blanked."""
    counts: collections.Counter = collections.Counter()
    for detail in report.details:
        m = re.search(r"error: (?:unexpected error: )?(.{0,60})", detail)
        if m:
            counts[re.sub(r"\d+|'[^']*'|\"[^\"]*\"", "_", m.group(1))] += 1
    return counts


def run(seed: int, count: int, *, workers_count: int = 2) -> workers.Report:
    return workers.run("fuzzing.opt_fuzz", seed, list(range(count)), workers=workers_count, timeout=120,
                       env={"PXLA_DEBUG": ""}, memory_limit=6 << 30)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=5000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--stats", action="store_true", help="print the most common first errors")
    p.add_argument("--replay", metavar="SEED:INDEX", help="print one case (input and command) and run it")
    a = p.parse_args(argv)
    if a.replay:
        seed, index = map(int, a.replay.split(":"))
        case = make_case(seed, index)
        path = pathlib.Path(tempfile.mkdtemp(prefix="pxla_fuzz_")) / "case.mlir"
        path.write_text(case.text)
        cmd = [sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", str(path), *case.argv]
        print("$", " ".join(cmd), file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        print(proc.stderr, file=sys.stderr)
        print(f"exit {proc.returncode}: {problem(proc.returncode, proc.stderr) or 'ok'}", file=sys.stderr)
        return 0
    report = run(a.seed, a.cases, workers_count=a.workers)
    print(f"pxla-opt fuzz, seed {a.seed}: {report.summary()}")
    if a.stats:
        for message, n in first_errors(report).most_common(60):
            print(f"  {n:6d}  {message}")
    for index, what, err in report.failures[:50]:
        print(f"  case {a.seed}:{index}: {what}\n    " + "\n    ".join(l[:300] for l in err.strip().splitlines()[-3:]))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
