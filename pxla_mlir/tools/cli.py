"""pxla-mlir: the user-facing command line.

    pxla-mlir passes [NAME...]            list passes/pipelines, or show one's documentation (--markdown)
    pxla-mlir emit TARGET [...]           print the MHLO (or another stage, XLA's HLO) of a pmap/xmap or FILE.mlir
    pxla-mlir diff A B [--ignore ATTR]    MLIR-aware diff of two modules or emit specs
    pxla-mlir run TARGET [...]            compile, run, time (TARGET may be FILE.mlir: run a module, compare results)
    pxla-mlir explore TARGET [-o page]    one HTML page: every stage, pass diffs, collectives, shardings
    pxla-mlir show-sharding SHARDING|FILE draw which piece of an array each device holds (HLO, Shardy, P(...), a module)
    pxla-mlir gen-checks [FILE|-]         FileCheck lines that check a printed module
    pxla-mlir update-checks TEST... [--check]  rewrite lit tests' generated CHECK blocks from their RUN lines
    pxla-mlir example [NAME] [--run]      list the installed examples, copy one out, or run it
    pxla-mlir reduce IN.mlir --test CMD   shrink a failing module to the smallest one that still fails

``python -m pxla_mlir`` is the same command line.

Mistakes print one line (``pxla-mlir: error: ...``) and exit 2; exit 1 is
kept for ``diff``'s "the modules differ", as diff(1) does.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from pxla_mlir.errors import PxlaUserError, entry_point
from pxla_mlir.mlir.cli.argparsing import ExactArgumentParser
from pxla_mlir.mlir.support.suggest import did_you_mean
from pxla_mlir.tools import (
    cmd_checks,
    cmd_diff,
    cmd_emit,
    cmd_example,
    cmd_explore,
    cmd_passes,
    cmd_reduce,
    cmd_run,
    cmd_sharding,
)
from pxla_mlir.tools.errors import ERROR_EXIT, CliError, describe, invalid_choice, positive_int
from pxla_mlir.version import __version__

PROG = "pxla-mlir"
_CPU_DEVICES_HELP = "virtual CPU devices (default 8, or the count XLA_FLAGS or JAX_NUM_CPU_DEVICES sets)"
_BACKEND_HELP = ("the jax platform to run on: cpu, tpu, cuda or rocm (sets JAX_PLATFORMS before jax starts; "
                 "default: JAX_PLATFORMS, else jax's choice)")

#: The end of each --help: commands that run as written, in this order, in an empty directory ('pxla-mlir example
#: NAME' copies the files they read, as a wheel has no examples/ folder); '# exit N' marks a documented failure.
#: tests/tools/test_help_examples.py runs every one.
TOP_EXAMPLES = ["pxla-mlir example --list",
                "pxla-mlir example train_step",
                "pxla-mlir emit train_step.py:train_step",
                "pxla-mlir emit --help"]
HELP_EXAMPLES = {
    "passes": ["pxla-mlir passes",
               "pxla-mlir passes pxla-expand-shard",
               "pxla-mlir passes --markdown pxla-expand-shard"],
    "emit": ["pxla-mlir example train_step",
             "pxla-mlir emit train_step.py:train_step",
             "pxla-mlir example nested_reduction",
             "pxla-mlir emit nested_reduction.py:two_level_sum --stage after:pxla-expand-shard",
             "pxla-mlir example per_device_psum",
             "pxla-mlir emit per_device_psum.mlir --stage xla"],
    "run": ["pxla-mlir example nested_reduction",
            "pxla-mlir run nested_reduction.py:two_level_sum --calls 100",
            "pxla-mlir example per_device_psum",
            "pxla-mlir run per_device_psum.mlir -o results/",
            "pxla-mlir example train_step",
            "pxla-mlir run train_step.py:train_step --seed 1 --calls 50"],
    "diff": ["pxla-mlir example nested_reduction",
             "pxla-mlir diff nested_reduction.py:two_level_sum 'nested_reduction.py:two_level_sum?unshard=all-reduce'"
             "   # exit 1: they differ",
             "pxla-mlir emit nested_reduction.py:two_level_sum -o before.mlir",
             "pxla-mlir emit nested_reduction.py:two_level_sum --mode partition --shardings gspmd -o after.mlir",
             "pxla-mlir diff before.mlir after.mlir --ignore mhlo.sharding   # exit 1: they differ"],
    "show-sharding": ["pxla-mlir show-sharding --shape 8,12 --hlo '{devices=[2,4]<=[8]}'",
                      "pxla-mlir show-sharding --shape 8,12 '#sdy.sharding<@mesh, [{\"x\"}, {}]>' --mesh x=2,y=4",
                      "pxla-mlir example xmap_2d",
                      "pxla-mlir emit xmap_2d.py:normalise_2d -o xmap_2d.mlir",
                      "pxla-mlir show-sharding xmap_2d.mlir"],
    "explore": ["pxla-mlir example nested_reduction",
                "pxla-mlir explore nested_reduction.py:two_level_sum -o nested.html",
                "pxla-mlir explore nested_reduction.py:two_level_sum --compare '?unshard=all-reduce'"],
    "gen-checks": ["pxla-mlir example train_step",
                   "pxla-mlir emit train_step.py:train_step | pxla-mlir gen-checks -",
                   "pxla-mlir emit train_step.py:train_step -o out.mlir",
                   "pxla-mlir gen-checks out.mlir --check-prefix MHLO"],
    "update-checks": ["pxla-mlir example per_device_psum",
                      "(echo '// RUN: pxla-opt %s -p \"builtin.module(pxla-handoff-pipeline)\" | filecheck %s'; "
                      "cat per_device_psum.mlir) > psum_test.mlir",
                      "pxla-mlir update-checks psum_test.mlir",
                      "pxla-mlir update-checks psum_test.mlir --check"],
    "reduce": ["pxla-mlir example per_device_psum",
               "pxla-mlir reduce per_device_psum.mlir --pipeline 'builtin.module(pxla-verify-handoff)' -o small.mlir",
               "pxla-mlir reduce per_device_psum.mlir --test \"pxla-opt {} -p 'builtin.module(pxla-verify-handoff)' "
               "2>&1 | grep -q chlo.erf\" -o erf.mlir",
               "pxla-mlir example nested_reduction",
               "PXLA_REPRO_DIR=repro pxla-mlir emit nested_reduction.py:two_level_sum --pipeline "
               "'builtin.module(pxla-verify-handoff)'   # exit 2; saves a reproducer",
               "pxla-mlir reduce --from-reproducer repro/pxla_repro_*.mlir -o small_repro.mlir "
               "--emit-lit-test small_test.mlir"],
    "example": ["pxla-mlir example --list",
                "pxla-mlir example train_step -o my_examples/",
                "pxla-mlir example pmap_demo --run"],
}


def examples_epilog(examples: list[str]) -> str:
    """The "examples:" block that ends a --help."""
    return "examples:\n" + "\n".join(f"  {line}" for line in examples)


def version_text() -> str:
    """``pxla-mlir 0.1.0 (jax 0.10.2, jaxlib 0.10.2)``: the versions a bug report needs, read from the installed
    distributions' metadata (importing jax would take seconds)."""
    import importlib.metadata

    def installed(name: str) -> str:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            return f"no {name}"

    return f"{PROG} {__version__} ({installed('jax')}, {installed('jaxlib')})"


class _Version(argparse._VersionAction):
    """argparse's --version, its text read only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        self.version = version_text()
        super().__call__(parser, namespace, values, option_string)


class _Parser(ExactArgumentParser):
    def _check_value(self, action: argparse.Action, value: str):
        # argparse's check, the hint taken from the action's choices themselves: every flag declared with
        # choices (open ones too, tools.errors.Choices) gets it, whatever argparse's message looks like
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(action, invalid_choice(value, action.choices))

    def error(self, message: str):  # one line (argparse: a usage dump), the hint after where to read more
        message, sep, hint = message.partition("; did you mean ")
        raise CliError(f"{message} (see {self.prog} --help){sep}{hint}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="pxla_mlir command line (also python -m pxla_mlir)",
                     epilog=examples_epilog(TOP_EXAMPLES),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--cpu-devices", type=positive_int, metavar="N", help=_CPU_DEVICES_HELP)
    parser.add_argument("--backend", type=_platform, metavar="NAME", help=_BACKEND_HELP)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    cmd_passes.add_parser(sub)
    cmd_emit.add_parser(sub)
    cmd_run.add_parser(sub)
    cmd_diff.add_parser(sub)
    cmd_sharding.add_parser(sub)
    cmd_explore.add_parser(sub)
    cmd_checks.add_parsers(sub)
    cmd_example.add_parser(sub)
    cmd_reduce.add_parser(sub)
    for name, command in sub.choices.items():
        _end_help_with_examples(command, HELP_EXAMPLES[name])
    for command in sub.choices.values():  # before or after the command name alike
        command.add_argument("--cpu-devices", type=positive_int, metavar="N", default=argparse.SUPPRESS,
                             help=_CPU_DEVICES_HELP)
        command.add_argument("--backend", type=_platform, metavar="NAME", default=argparse.SUPPRESS,
                             help=_BACKEND_HELP)
    return parser


def _end_help_with_examples(command: argparse.ArgumentParser, examples: list[str]) -> None:
    """``command --help`` ends with an "examples:" block, after the epilog it had (wrapped here, as the
    examples keep their lines)."""
    if command.description:
        command.description = textwrap.fill(command.description, width=100)
    before = textwrap.fill(command.epilog, width=100) + "\n\n" if command.epilog else ""
    command.epilog = before + examples_epilog(examples)
    command.formatter_class = argparse.RawDescriptionHelpFormatter


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> str:
    """argparse's message, with the command's flag spelled most like the first unknown one."""
    command = getattr(args, "command", None)
    prog = f"{PROG} {command}" if command else PROG
    message = f"unrecognized arguments: {' '.join(unknown)} (see {prog} --help)"
    flag = unknown[0].split("=", 1)[0]
    if not flag.startswith("--"):
        return message
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = (sub.choices[command] if command else parser)._option_string_actions
    return message + did_you_mean(flag, [o for o in options if o.startswith("--")])


#: jax's platforms by name; --backend passes others on (a plugin's) unless one of these is spelled like them.
PLATFORMS = ("cpu", "tpu", "cuda", "rocm", "gpu")


def _platform(text: str) -> str:
    name = text.strip().lower()
    if not name or "," in name:
        raise argparse.ArgumentTypeError(f"expected one platform name (cpu, tpu, cuda, rocm), got {text!r}")
    hint = "" if name in PLATFORMS else did_you_mean(name, PLATFORMS)
    if hint:
        raise argparse.ArgumentTypeError(f"unknown platform {text!r} (jax's: {', '.join(PLATFORMS)}){hint}")
    return name


def _backend(name: str | None) -> None:
    """Makes ``name`` jax's only platform (JAX_PLATFORMS), before its backends start."""
    if name is None:
        return
    os.environ["JAX_PLATFORMS"] = name  # for a jax imported later, and for the processes of 'run --processes'
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_platforms", name)


def _cpu_devices(n: int | None) -> None:
    """Sets jax's jax_num_cpu_devices, which jax reads once, when its backend starts
    (it wins over XLA_FLAGS's xla_force_host_platform_device_count)."""
    from pxla_mlir.distributed.launch import ENV_PROCESS_ID
    from pxla_mlir.distributed.mpirun import ENV_LAUNCHER

    if os.environ.get(ENV_PROCESS_ID) is not None or os.environ.get(ENV_LAUNCHER) is not None:
        return  # one process of 'run --processes': its launcher set its share
    if n is None:
        flags = os.environ.get("XLA_FLAGS", "")
        if "JAX_NUM_CPU_DEVICES" in os.environ or "xla_force_host_platform_device_count" in flags:
            return  # the environment's count
        n = 8
    else:
        platforms = [p.strip() for p in os.environ.get("JAX_PLATFORMS", "").split(",") if p.strip()]
        if platforms and "cpu" not in platforms:
            print(f"{PROG}: note: --cpu-devices {n} does not apply: JAX_PLATFORMS={','.join(platforms)} runs on "
                  f"other devices (add --backend cpu to run on {n} CPU devices)", file=sys.stderr)
            return
    os.environ["JAX_NUM_CPU_DEVICES"] = str(n)  # for a jax imported later
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_num_cpu_devices", n)


def _load_plugins(specs: Sequence[str]) -> None:
    """--load-pass-plugin: the passes of each plugin, registered before the command names them."""
    if specs:
        from pxla_mlir.mlir.pass_infra.plugins import load_plugin

        for spec in specs:
            load_plugin(spec)


# An entry point: the maps it calls leave their frames in (describe() tells a bug of ours by them, PXLA_DEBUG=1 shows
# them); its errors are one line.
@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = None
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            raise CliError(_unrecognized(parser, args, unknown))
        args.argv = list(sys.argv[1:] if argv is None else argv)  # run --processes starts copies of this command
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return ERROR_EXIT
        _backend(args.backend)
        _cpu_devices(args.cpu_devices)
        _load_plugins(getattr(args, "load_pass_plugin", None) or ())
        return args.func(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return ERROR_EXIT
    except Exception as e:  # one line; only a bug of ours asks for the traceback
        if "jax" in sys.modules:  # a backend that cannot start is the environment's (jax raised it on the way)
            from pxla_mlir.mlir.sharding.devices import BackendError, backend_error

            command = getattr(args, "command", None)
            e = backend_error(e, f"{PROG} {command}" if command else PROG) or e
            if isinstance(e, BackendError):  # the command line's own way to choose the backend
                e = BackendError(f"{e} ({PROG}: --backend cpu)")
        if os.environ.get("PXLA_DEBUG") and not isinstance(e, PxlaUserError):
            raise
        diagnostic = getattr(e, "diagnostic", None)  # text that does not parse: said as pxla-opt says it
        if isinstance(e, PxlaUserError) and diagnostic:
            print(diagnostic, file=sys.stderr)
            return ERROR_EXIT
        message, is_bug = describe(e)
        hint = " (set PXLA_DEBUG=1 for the traceback)" if is_bug else ""
        print(f"{PROG}: error: {message}{hint}", file=sys.stderr)
        reproducer = getattr(e, "reproducer", None)
        if reproducer:
            from pxla_mlir.mlir.pass_infra.reproducer import rerun_command

            print(f"{PROG}: reproduce with: {rerun_command(reproducer)}", file=sys.stderr)
        return ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
