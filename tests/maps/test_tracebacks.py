"""Tracebacks of errors that escape a map: the user's lines, none of pxla_mlir's frames, as jax filters its own
(``jax_traceback_filtering`` / ``JAX_TRACEBACK_FILTERING``), for mistakes found while tracing, lowering, compiling
and running pmaps, xmaps and ``pxla_mlir.jit``."""

import os
import re
import subprocess
import sys
import traceback

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.tracebacks import OUR_FOLDERS, filter_frames
from pxla_mlir.maps.tracing import UnboundAxisError

NOTE = "For simplicity, JAX has removed its internal frames"


def _ours(filename: str) -> bool:
    path = os.path.abspath(filename)
    return any(path == f or path.startswith(f + os.sep) for f in OUR_FOLDERS)


def body(a):
    return lax.psum(a, "j")  # "j" is bound by no map


def _raised(thunk) -> BaseException:
    try:
        thunk()
    except Exception as e:
        return e
    raise AssertionError("did not raise")


@pytest.fixture
def filtering():
    """Sets jax_traceback_filtering for one test."""
    before = jax.config.jax_traceback_filtering  # pyright: ignore[reportAttributeAccessIssue]
    yield lambda mode: jax.config.update("jax_traceback_filtering", mode)
    jax.config.update("jax_traceback_filtering", before)


@pytest.mark.parametrize("kind", ["pmap", "xmap", "jit", "method"])
def test_a_traced_mistake_shows_the_users_lines_and_none_of_ours(kind):
    class Model:
        @pxla_mlir.pmap(axis_name="i", static_broadcasted_argnums=0)
        def step(self, a):
            return body(a)

    x = jnp.ones((8, 3))
    mapped = {"pmap": lambda: pxla_mlir.pmap(body, axis_name="i")(x),
              "xmap": lambda: pxla_mlir.xmap(body, in_axes=["i", ...], out_axes=["i", ...])(x),
              "jit": lambda: pxla_mlir.jit(body)(x), "method": lambda: Model().step(x)}[kind]
    e = _raised(mapped)
    assert isinstance(e, UnboundAxisError)
    frames = traceback.extract_tb(e.__traceback__)
    assert not [f for f in frames if _ours(f.filename)]
    assert frames[-1].name == "body" and frames[-1].line == 'return lax.psum(a, "j")  # "j" is bound by no map'
    assert [f.name for f in frames if f.filename == __file__][:2] == ["_raised", "<lambda>"]
    assert len(e.__notes__) == 1 and NOTE in e.__notes__[0] and "JAX_TRACEBACK_FILTERING=off" in e.__notes__[0]


def test_filtering_off_keeps_every_frame(filtering):
    filtering("off")
    e = _raised(lambda: pxla_mlir.pmap(body, axis_name="i")(jnp.ones((8, 3))))
    frames = traceback.extract_tb(e.__traceback__)
    assert [f for f in frames if _ours(f.filename)] and frames[-1].filename != __file__  # jax's frames too
    assert "body" in [f.name for f in frames] and not getattr(e, "__notes__", None)


def test_remove_frames_keeps_the_whole_traceback_as_the_cause(filtering):
    filtering("remove_frames")
    e = _raised(lambda: pxla_mlir.pmap(body, axis_name="i").lower(jnp.ones((8, 3))))
    assert not [f for f in traceback.extract_tb(e.__traceback__) if _ours(f.filename)]
    cause = e.__cause__
    assert type(cause).__name__ == "UnfilteredStackTrace" and "unbound axis name: j" in str(cause)
    assert [f for f in traceback.extract_tb(cause.__traceback__) if _ours(f.filename)]


def test_tracebackhide_marks_our_frames_for_ipython(filtering):
    filtering("tracebackhide")
    e = _raised(lambda: pxla_mlir.pmap(body, axis_name="i")(jnp.ones((8, 3))))
    walked = list(traceback.walk_tb(e.__traceback__))
    ours = [f for f, _ in walked if _ours(f.f_code.co_filename)]
    assert ours and all(f.f_locals.get("__tracebackhide__") for f in ours)
    assert not any(f.f_locals.get("__tracebackhide__") for f, _ in walked if f.f_code.co_filename == __file__)


def test_the_outermost_boundary_filters_once():
    """Under jax.jit, jax's boundary filters (our frames too); a jax.jit inside a map's body filtered its part
    already: one note either way."""
    x = jnp.ones((8, 3))
    for thunk in (lambda: jax.jit(pxla_mlir.pmap(body, axis_name="i"))(x),
                  lambda: pxla_mlir.pmap(lambda a: jax.jit(body)(a), axis_name="i")(x),
                  lambda: pxla_mlir.jit(pxla_mlir.pmap(lambda a: jax.jit(body)(a), axis_name="i"))(x)):
        e = _raised(thunk)
        frames = traceback.extract_tb(e.__traceback__)
        assert not [f for f in frames if _ours(f.filename)] and frames[-1].name == "body"
        assert sum(NOTE in n for n in e.__notes__) == 1


def test_pxla_user_errors_show_no_frame_of_ours():
    x = jnp.ones((8, 3))
    compiled = pxla_mlir.pmap(lambda a: a * 2, axis_name="i").lower(x).compile()
    e = _raised(lambda: compiled(jnp.ones((8, 4))))
    assert isinstance(e, PxlaUserError)
    assert [f.name for f in traceback.extract_tb(e.__traceback__)] == ["_raised", "<lambda>"]


def test_filter_frames_leaves_an_exception_below_a_boundary_alone():
    def inner():
        try:
            raise ValueError("x")
        except ValueError as e:
            filter_frames(e)  # under pxla_mlir.jit's boundary: not this frame's to filter
            raise

    e = _raised(lambda: pxla_mlir.jit(lambda a: (inner(), a)[1])(jnp.ones(3)))
    assert [f.name for f in traceback.extract_tb(e.__traceback__)][-2:] == ["<lambda>", "inner"]


# -- what a user sees: a program run as a script, each stage, each kind, against jax ------------------------------

PROGRAM = '''
import os, sys, traceback
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching
from jax.sharding import Mesh, PartitionSpec as P
import pxla_mlir

def body(a):
    return lax.psum(a, "j")

no_rule_p = Primitive("no_lowering_rule")
no_rule_p.def_abstract_eval(lambda a: a)

def unlowerable(a):
    return no_rule_p.bind(a)

def batched(args, dims):  # an xmap vmaps its body
    return no_rule_p.bind(*args), dims[0]

batching.primitive_batchers[no_rule_p] = batched

def double(a):
    return a * 2

def show(case, thunk):
    try:
        thunk()
    except Exception as e:
        print("=== " + case, file=sys.stderr)
        traceback.print_exception(e)
    else:
        print("=== " + case + ": no error", file=sys.stderr)

class Model:
    @pxla_mlir.pmap(axis_name="i", static_broadcasted_argnums=0)
    def step(self, a):
        return body(a)

x = jnp.ones((8, 3))
XS = dict(in_axes=["i", ...], out_axes=["i", ...])
mesh = Mesh(np.array(jax.devices()), ("i",))
both = pxla_mlir.jit(lambda a: pxla_mlir.pmap(double, axis_name="i")(a) + pxla_mlir.xmap(double, **XS)(a))
pm, xm, jt = pxla_mlir.pmap(double, axis_name="i"), pxla_mlir.xmap(double, **XS), pxla_mlir.jit(double)
live = {name: f(f(x)) for name, f in (("pmap", pm), ("xmap", xm), ("jit", jt))}  # cached calls from here
for y in live.values():
    y.delete()

show("jax.vmap trace", lambda: jax.vmap(body, axis_name="i")(x))
show("jax.jit(shard_map) trace", lambda: jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))(x))
show("pmap trace", lambda: pxla_mlir.pmap(body, axis_name="i")(x))
show("xmap trace", lambda: pxla_mlir.xmap(body, **XS)(x))
show("jit trace", lambda: pxla_mlir.jit(body)(x))
show("jit of pmap trace", lambda: pxla_mlir.jit(pxla_mlir.pmap(body, axis_name="i"))(x))
show("jax.jit of pmap trace", lambda: jax.jit(pxla_mlir.pmap(body, axis_name="i"))(x))
show("method trace", lambda: Model().step(x))
show("pmap lower trace", lambda: pxla_mlir.pmap(body, axis_name="i").lower(x))
show("pmap lower", lambda: pxla_mlir.pmap(unlowerable, axis_name="i")(x))
show("xmap lower", lambda: pxla_mlir.xmap(unlowerable, **XS)(x))
show("jit lower", lambda: pxla_mlir.jit(unlowerable).lower(x))
show("jit mixing kinds lower", lambda: both(x))
show("pmap compile", lambda: pm.lower(x).compile({"xla_no_such_option": True}))
show("xmap compile", lambda: xm.lower(x).compile({"xla_no_such_option": True}))
show("jit compile", lambda: jt.lower(x).compile({"xla_no_such_option": True}))
show("pmap run", lambda: pm(live["pmap"]))
show("xmap run", lambda: xm(live["xmap"]))
show("jit run", lambda: jt(live["jit"]))
show("Compiled run", lambda: pm.lower(x).compile()(jnp.ones((8, 4))))
print("=== uncaught", file=sys.stderr)
pxla_mlir.pmap(lambda a: lax.psum(a, "j"), axis_name="i")(x)
'''

#: The cases of PROGRAM whose mistake is in the body (its line shown last), and jax's own.
TRACE = ["pmap trace", "xmap trace", "jit trace", "jit of pmap trace", "jax.jit of pmap trace", "method trace",
         "pmap lower trace"]
JAX = ["jax.vmap trace", "jax.jit(shard_map) trace"]
OTHERS = ["pmap lower", "xmap lower", "jit lower", "jit mixing kinds lower", "pmap compile", "xmap compile",
          "jit compile", "pmap run", "xmap run", "jit run", "Compiled run"]
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)$', re.M)


def _run(tmp_path, mode: str | None) -> tuple[dict[str, str], str]:
    """Each case's printed traceback, and the uncaught error's stderr, with JAX_TRACEBACK_FILTERING=mode."""
    program = tmp_path / "user_program.py"
    program.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_TRACEBACK_FILTERING", "XLA_FLAGS")}
    if mode is not None:
        env["JAX_TRACEBACK_FILTERING"] = mode
    p = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, env=env,
                       cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    sections = dict(re.findall(r"^=== ([^\n]+)\n(.*?)(?=^=== |\Z)", p.stderr, re.S | re.M))
    assert set(sections) == {*TRACE, *JAX, *OTHERS, "uncaught"}, list(sections)
    return sections, sections.pop("uncaught")


def _frames(text: str) -> list[tuple[str, int, str]]:
    return [(m["file"], int(m["line"]), m["name"]) for m in _FRAME.finditer(text)]


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(PROGRAM.splitlines(), 1) if text in line)


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_user_sees_their_lines_at_every_stage_as_with_jax(tmp_path):
    sections, uncaught = _run(tmp_path, None)
    program = str(tmp_path / "user_program.py")
    body_line = _line_of('return lax.psum(a, "j")')
    jax_names = {case: [n for f, _, n in _frames(sections[case]) if f == program] for case in JAX}
    assert jax_names["jax.vmap trace"] == jax_names["jax.jit(shard_map) trace"] == ["show", "<lambda>", "body"]
    for case in TRACE + OTHERS:
        text = sections[case]
        frames = _frames(text)
        assert not [f for f in frames if _ours(f[0])], (case, text)
        assert (program, _line_of(f'show("{case}"'), "<lambda>") in frames, (case, text)
        assert NOTE in text, (case, text)
        if case in TRACE:  # the line of the mistake, last, after the user's own calls: what jax shows
            assert frames[-1] == (program, body_line, "body"), (case, text)
            names = [n for f, _, n in frames if f == program]
            assert names[:2] + names[-1:] == jax_names["jax.vmap trace"], (case, text)
        elif case.endswith("compile"):
            assert "No such compile option: 'xla_no_such_option'" in text, (case, text)
        elif case.endswith("run"):
            assert re.search(r"Array has been deleted|Argument types differ", text), (case, text)
    # jax names the line of the operation it could not lower (in an xmap, its batching rule's: the body is vmapped)
    for case, where, name in (("pmap lower", "return no_rule_p.bind(a)", "unlowerable"),
                              ("xmap lower", "return no_rule_p.bind(*args)", "batched"),
                              ("jit lower", "return no_rule_p.bind(a)", "unlowerable")):
        assert (program, _line_of(where), name) in _frames(sections[case]), sections[case]
        assert "MLIR translation rule for primitive 'no_lowering_rule' not found" in sections[case]
    assert "holds both pmaps and xmaps" in sections["jit mixing kinds lower"]
    # The program, uncaught: its lambda's line, and nothing of ours.
    frames = _frames(uncaught)
    assert [f[2] for f in frames] == ["<module>", "<lambda>"] and frames[-1][0] == program
    assert uncaught.rstrip().splitlines()[-3].startswith("pxla_mlir.maps.tracing.UnboundAxisError: unbound axis")


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["off", "remove_frames"])
def test_jax_traceback_filtering_brings_our_frames_back(tmp_path, mode):
    sections, uncaught = _run(tmp_path, mode)
    for case, text in [*sections.items(), ("uncaught", uncaught)]:
        if case in JAX:
            continue
        *whole, shown = re.split(r"^Traceback \(most recent call last\):$", text, flags=re.M)
        if mode == "off":  # every frame, as it was raised
            assert [f for f in _frames(text) if _ours(f[0])] and NOTE not in text, (case, text)
        else:  # jax's remove_frames: the whole traceback as the cause, the filtered one after it
            assert "UnfilteredStackTrace" in text and [f for f in _frames("".join(whole)) if _ours(f[0])], (case, text)
            assert not [f for f in _frames(shown) if _ours(f[0])], (case, text)
