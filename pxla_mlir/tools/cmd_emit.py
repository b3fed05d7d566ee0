"""pxla-mlir emit: lower a pmap or xmap from the command line.

    pxla-mlir emit examples/train_step.py:train_step                 # declared example inputs
    pxla-mlir emit pkg.mod:f --map pmap --axis-name i --arg f32[8,128] --stage pxla
    pxla-mlir emit file.py:f --stage after:pxla-expand-unshard --dump-dir dumps/
    pxla-mlir emit step.mlir --stage xla                                # a module file: XLA's HLO of it

A module file (``FILE.mlir``, or ``-`` for stdin) goes through what it needs
before XLA, as ``pxla-mlir run`` takes it (:mod:`pxla_mlir.stages.text_module`):
``--stage mhlo`` prints the module XLA gets, ``hlo`` jaxlib's conversion of it
to HLO, ``xla`` the HLO XLA optimized for the devices.
"""

from __future__ import annotations

import argparse
import os

from pxla_mlir.mlir.support.suggest import did_you_mean
from pxla_mlir.tools.emit import STAGE_CHOICES, MapOptions, prepare, stage_text
from pxla_mlir.tools.errors import CliError, invalid_choice, write_output
from pxla_mlir.tools.map_args import MAP_FLAGS, add_map_arguments, map_options
from pxla_mlir.tools.progress import status


def add_parser(sub) -> argparse.ArgumentParser:
    e = sub.add_parser("emit", help="print the MHLO (or another stage) of a pmap/xmap, or of a module file")
    add_map_arguments(e)
    e.add_argument("--stage", default="mhlo", choices=STAGE_CHOICES, metavar="STAGE",
                   help="pxla (imported), after:<pass>, mhlo (final, the default), hlo (XLA's HLO before its "
                        "optimizations) or xla (optimized HLO); a FILE.mlir target: mhlo, hlo or xla")
    e.add_argument("--pipeline", help="run this pipeline instead of the map's own")
    e.add_argument("--dump-dir", help="write the module after every pass to DIR/NN_<pass>.mlir")
    e.add_argument("--dialect", choices=("mhlo", "stablehlo"), default="mhlo", help="export the result as")
    e.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    e.set_defaults(func=run_emit)
    return e


def emit_text(target: str, options: dict) -> str:
    """Emit with options given as {flag: [values]} (used by diff's emit specs)."""
    known = set(MAP_FLAGS) | {"arg", "stage", "dialect", "pipeline"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise CliError(f"unknown emit option {unknown[0]!r} in {target!r}; known: {', '.join(sorted(known))}"
                       f"{did_you_mean(unknown[0], known)}")
    check_choices(options, repr(target))
    one = {k: v[-1] for k, v in options.items()}
    opts = MapOptions(**{k: one[k] for k in MAP_FLAGS if k in one}, args=tuple(options.get("arg", ())))
    return _emitted(target, opts, one.get("stage", "mhlo"), pipeline=one.get("pipeline"),
                    dialect=one.get("dialect", "mhlo"))


def _emitted(target: str, opts: MapOptions, stage: str, **stage_options) -> str:
    """A Python target lowered, and the text of one of its stages (saying what it does on a terminal)."""
    with status(f"loading {target}"):
        prepared = prepare(target, opts)
    with prepared.context():
        with status(f"lowering {target}"):
            lowered = prepared.fn.lower(*[a.struct() for a in prepared.args])
        with status(f"compiling {target} for {len(lowered.devices)} devices" if stage == "xla"
                    else f"printing {target} at stage {stage}"):
            return stage_text(lowered, stage, **stage_options)


def check_choices(options: dict, where: str) -> None:
    """An emit spec's values ({field: [values]}) refused as emit's own flags refuse them, with the same message."""
    choices = _choices()
    for key, values in options.items():
        wrong = [v for v in values if key in choices and v not in choices[key]]
        if wrong:
            raise CliError(f"{key}={wrong[0]} in {where}: {invalid_choice(wrong[0], choices[key])}")


def _choices() -> dict:
    """The choices of emit's choice-valued flags, by field, from the flags themselves."""
    emit = add_parser(argparse.ArgumentParser().add_subparsers())
    return {a.dest: a.choices for a in emit._actions if a.choices is not None}


def _check_dump_dir(path: str) -> None:
    """--dump-dir must be a directory that exists or can be made (before the lowering's work)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"--dump-dir {path!r} is a file, not a directory; give a directory (it is made if missing)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot make --dump-dir {path!r}: {e.strerror}") from None


#: The stages of a module read from a file (what it was before is not known).
MODULE_STAGES = ("mhlo", "hlo", "xla")


def emit_module(args) -> str:
    """The text of a module file (or stdin) at ``args.stage``, after what it needs before XLA."""
    from pxla_mlir.tools.cmd_run_module import compile_target, load_target

    mapping = [f for f in MAP_FLAGS if getattr(args, f, None) is not None]
    if mapping or args.arg:
        flag = "--arg" if not mapping else "--" + mapping[0].replace("_", "-")
        raise CliError(f"{flag} says how to map a Python function; {args.target} is a module, which needs no "
                       f"mapping (run another pipeline on it with --pipeline)")
    if args.dump_dir is not None:
        raise CliError(f"--dump-dir writes a map's stages; for a module, run its passes with pxla-opt "
                       f"{args.target} -p PIPELINE --mlir-print-ir-after-all")
    if args.stage not in MODULE_STAGES:
        raise CliError(f"--stage {args.stage}: a module file has the stages {', '.join(MODULE_STAGES)} (what it "
                       f"was before is not in it); emit the stages of its Python program instead")
    if args.dialect != "mhlo" and args.stage != "mhlo":
        raise CliError(f"--dialect applies to --stage mhlo; --stage {args.stage} prints HLO")
    lowered = load_target(args.target, pipeline=args.pipeline)
    if args.stage == "xla":
        return compile_target(lowered).as_text()
    return lowered.as_text("hlo" if args.stage == "hlo" else args.dialect)


def run_emit(args) -> int:
    from pxla_mlir.tools.cmd_run_module import is_module_target

    if is_module_target(args.target):
        write_output(args.output, emit_module(args))
        return 0
    if args.dump_dir is not None:
        _check_dump_dir(args.dump_dir)
    text = _emitted(args.target, map_options(args), args.stage, pipeline=args.pipeline, dump_dir=args.dump_dir,
                    dialect=args.dialect)
    write_output(args.output, text)
    return 0
