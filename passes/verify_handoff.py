"""pxla-verify-handoff: checks that a module is ready to hand to XLA.

The last pass of every pxla pipeline. It changes nothing; it fails, with an
error at the offending op, when:

* an op outside builtin/func/mhlo remains (stablehlo, chlo, ...), except
  the ``sdy`` dialect in a Shardy-form module;
* sharding constructs of the other dialect remain: in the GSPMD form
  (``sharding-dialect=gspmd``) any ``sdy`` op or ``sdy.sharding``; in the
  Shardy form (``sharding-dialect=sdy``) any ``mhlo.sharding`` or
  ``@Sharding``/``@SPMDFullToShardShape``/``@SPMDShardToFullShape`` custom
  call (XLA ignores the first and rejects the others once Shardy is on), or
  an ``sdy.mesh`` whose device count is not ``mhlo.num_partitions`` (with
  one replica), or an ``sdy.manual_computation`` in a module with one
  partition (pxla-inline-manual-computations). In the GSPMD form of a multi-partition module, an
  ``mhlo.sharding`` must name devices of the module: ``{maximal device=N}``
  with N below ``mhlo.num_partitions``, a tile assignment naming every
  partition once (XLA's HLO verifier rejects anything else, deep inside
  the compile); likewise in the Shardy form a mesh written inside an
  ``sdy.sharding`` (``mesh<[], device_ids=[N]>``, as host callbacks get) or
  an ``sdy.mesh`` without axes must name one of the partitions, and a mesh
  with axes all of them. ``sharding-dialect=auto`` (the default) reads the form from
  the module: Shardy when it has any ``sdy`` op or ``sdy.sharding``;
* a module with both ``mhlo.num_replicas > 1`` and ``mhlo.num_partitions >
  1`` carries a tiled ``mhlo.sharding`` (jaxlib 0.10.2 aborts the process
  running it, :mod:`pxla_mlir.mlir.core.replica_shardings`);
* a ``pxla.*`` placeholder (``mhlo.custom_call @pxla.shard`` etc.) survived;
* the module has no ``@main`` (XLA runs it; a pass of your own may have
  removed it);
* ``mhlo.num_replicas`` / ``mhlo.num_partitions`` are missing, not positive,
  or differ from the expected counts given as options;
* a collective's device ids do not fit the module: in every mode (see
  :mod:`pxla_mlir.mlir.core.device_groups`) the groups must use ids in range, be
  disjoint and together cover every id, and have the same size (except for
  ``all_reduce``, whose groups XLA lets differ in size: shorter groups are
  padded with -1, as jax lowers ``psum(..., axis_index_groups=...)`` with
  groups of different sizes); a collective permute's sources and targets
  must be in range and distinct.

It warns when ``replica_id`` is used in a module with one replica (it is then
always 0), and likewise for ``partition_id``.

Before (fails: group {0,1,2} is not all 4 replicas, and 7 is out of range)::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
      func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
        %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>}> ...
        %1 = "mhlo.collective_permute"(%0) <{source_target_pairs = dense<[[0, 7]]> : tensor<1x2xi64>}> ...

After: unchanged when valid.

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-verify-handoff{num-replicas=4})'
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import device_groups, ir_utils, pxla_attrs, replica_shardings, shardy
from pxla_mlir.mlir.core.pxla_attrs import NUM_PARTITIONS, NUM_REPLICAS
from pxla_mlir.mlir.pass_infra import ModulePass, PassError, option
from pxla_mlir.mlir.sharding.hlo_sharding import parse_elements


@dataclasses.dataclass(frozen=True)
class Form:
    """What one output form (sharding dialect) allows in a module handed to XLA."""

    module: str  # how messages name a module in this form
    dialects: tuple[str, ...]  # the dialects its ops may come from
    manual_expander: str  # the pass that expands its manual-region placeholders
    foreign_attr: str  # the other form's sharding attribute, which XLA ignores in this form
    foreign_attr_hint: str
    foreign_targets: frozenset = frozenset()  # custom calls of another form, which XLA rejects in this one
    foreign_target_hint: str = ""
    checks_mesh: bool = False  # sdy.mesh must span mhlo.num_partitions


#: Every output form: a third one is a new entry here.
FORMS = {
    "gspmd": Form("a GSPMD module (sharding-dialect=gspmd)", ("builtin", "func", "mhlo"), "pxla-expand-manual-sharding",
                  shardy.SHARDING, "XLA ignores it without Shardy; write mhlo.sharding instead"),
    "sdy": Form("a Shardy module", ("builtin", "func", "mhlo", "sdy"), "pxla-expand-manual-computation",
                shardy.GSPMD_SHARDING, "XLA ignores it once Shardy partitions the module; write sdy.sharding instead",
                frozenset(shardy.GSPMD_TARGETS),
                "XLA rejects it once Shardy partitions the module; use sdy.manual_computation "
                "(pxla-expand-manual-computation)", checks_mesh=True),
}
#: Which pass expands each placeholder (None: the form's manual_expander).
EXPANDED_BY = {pxla_attrs.FULL_TO_SHARD: None, pxla_attrs.SHARD_TO_FULL: None, pxla_attrs.SHARD: "pxla-expand-shard",
               pxla_attrs.UNSHARD: "pxla-expand-unshard",
               pxla_attrs.SHARDING_CONSTRAINT: "pxla-expand-sharding-constraints"}
_HOW_TO_REMOVE = {
    "stablehlo": "legalize it with stablehlo-legalize-to-hlo",
    "chlo": "legalize it with func.func(chlo-legalize-to-hlo)",
    "sdy": "this module is checked as GSPMD (sharding-dialect=gspmd): lower it with sharding-dialect=sdy, or "
           "without Shardy",
}


@dataclasses.dataclass(frozen=True)
class VerifyHandoffPass(ModulePass):
    argument = "pxla-verify-handoff"
    summary = "Check that only builtin/func/mhlo (and sdy in the Shardy form) remain and device counts agree"
    checks_only = True

    num_replicas: int = option(0, "expected mhlo.num_replicas (0: any)", minimum=0, maximum=pxla_attrs.MAX_DEVICES)
    num_partitions: int = option(0, "expected mhlo.num_partitions (0: any)", minimum=0,
                                 maximum=pxla_attrs.MAX_DEVICES)
    sharding_dialect: Literal["auto", "gspmd", "sdy"] = option(
        "auto", "the module's sharding constructs: GSPMD (no sdy), Shardy (sdy, no GSPMD), or auto (read the module)")

    def run(self, module):
        replicas, partitions = self._device_counts(module)
        if ir_utils.find_function(module, "main") is None:
            self.error(module, "the module has no func.func @main, which XLA runs: a pass before this one removed "
                               "or renamed it")
        # An op of a plain name without a sharding attribute (most of a large
        # module) passes every check below: only the others are checked.
        ops = ir_utils.walk_selected(module, lambda n: not _is_plain(n),
                                     attrs=(shardy.SHARDING, shardy.GSPMD_SHARDING))
        name = self.sharding_dialect
        if name == "auto":
            name = "sdy" if shardy.uses_shardy(module, ops) else "gspmd"
        form = FORMS[name]
        collectives: dict = {}  # (op name, group mode, groups attribute) -> problems: collectives repeat
        unknown_dialect_seen: set[str] = set()
        for op, op_name in ops:
            dialect = op_name.split(".", 1)[0] if "." in op_name else "builtin"
            target = pxla_attrs.custom_call_target(op) if op_name == "mhlo.custom_call" else None
            # Only a function's boundary, or an op's own sharding attributes, can fail the next two checks.
            boundary, attrs = op_name == "func.func", op.attributes
            if boundary or form.foreign_attr in attrs:
                self._check_sharding_attrs(op, form)
            if name == "gspmd" and partitions > 1 and (boundary or shardy.GSPMD_SHARDING in attrs):
                self._check_sharding_devices(op, partitions)
            if name == "sdy" and partitions > 1 and (boundary or dialect == "sdy" or shardy.SHARDING in attrs):
                self._check_sdy_sharding_devices(op, partitions)
            if replicas > 1 and partitions > 1 and (problem := replica_shardings.problem(op, replicas, partitions)):
                self.error(op, problem)
            if target is not None and pxla_attrs.is_pxla_name(target):
                expander = EXPANDED_BY.get(target, "the pxla pass that expands it (pxla-opt --list-passes)")
                self.error(op, f"placeholder @{target} was not expanded; run {expander or form.manual_expander} "
                               f"before handing the module to XLA")
            elif pxla_attrs.is_pxla_name(op_name):
                self.error(op, f"pxla placeholder op '{op_name}' was not expanded")
            elif dialect not in form.dialects and op_name not in unknown_dialect_seen:
                unknown_dialect_seen.add(op_name)
                how = _HOW_TO_REMOVE.get(dialect, "only builtin, func and mhlo ops (and sdy in the Shardy form) can "
                                                  "be handed to XLA")
                self.error(op, f"'{op_name}' is not builtin/func/mhlo; {how}")
            elif target in form.foreign_targets:
                self.error(op, f"GSPMD custom call @{target} in {form.module}: {form.foreign_target_hint}")
            elif op_name == shardy.MESH_OP and form.checks_mesh:
                self._check_mesh(op, replicas, partitions)
            elif op_name == shardy.MANUAL_COMPUTATION and partitions == 1:
                self.error(op, f"{op_name} in a module with mhlo.num_partitions = 1: XLA compiles it without the "
                               f"SPMD partitioner, the one pass that takes a manual region apart (TPU: 'Custom "
                               f"emitter for xla.sdy.GlobalToLocalShape not found'); run "
                               f"pxla-inline-manual-computations")
            elif op_name in device_groups.MHLO_COLLECTIVES:
                key = (op_name, device_groups.group_mode(op), _groups_attr(op))
                if key not in collectives:
                    collectives[key] = self._collective_problems(op, replicas, partitions)
                for problem in collectives[key]:
                    self.error(op, problem)
            elif op_name == "mhlo.replica_id" and replicas == 1 and partitions > 1:
                self.warn(op, "replica_id is always 0 in a module with num_replicas = 1; "
                              "did you mean partition_id?")
            elif op_name == "mhlo.partition_id" and partitions == 1 and replicas > 1:
                self.warn(op, "partition_id is always 0 in a module with num_partitions = 1; "
                              "did you mean replica_id?")

    def _device_counts(self, module) -> tuple[int, int]:
        for attr in (NUM_REPLICAS, NUM_PARTITIONS):
            if attr not in module.attributes:
                raise PassError(module, f"module has no '{attr}' attribute; XLA needs "
                                        f"'{attr} = N : i32' on the module to compile it")
        counts = pxla_attrs.device_counts(module)
        for attr, value, expected in zip((NUM_REPLICAS, NUM_PARTITIONS), counts,
                                         (self.num_replicas, self.num_partitions)):
            if expected and value != expected:
                raise PassError(module, f"'{attr}' is {value} but {expected} was expected")
        return counts

    def _check_sharding_attrs(self, op, form: Form) -> None:
        """No sharding attribute of another form, on the op or its function boundary."""
        for where, attrs in replica_shardings.places(op):
            if form.foreign_attr in attrs:
                self.error(op, f"{where}{op.name} has {form.foreign_attr} in {form.module}: {form.foreign_attr_hint}")

    def _check_sharding_devices(self, op, partitions: int) -> None:
        """Every device an mhlo.sharding names is one of the module's partitions."""
        for where, attrs in replica_shardings.places(op):
            if shardy.GSPMD_SHARDING not in attrs or not isinstance(attrs[shardy.GSPMD_SHARDING], ir.StringAttr):
                continue
            text = ir.StringAttr(attrs[shardy.GSPMD_SHARDING]).value
            try:
                shardings = parse_elements(text)
            except ValueError:
                continue  # a form this checker does not read (XLA validates it)
            for sharding in shardings:
                problem = _device_problem(sharding, partitions)
                if problem:
                    self.error(op, f"{where}{op.name} has mhlo.sharding = \"{text}\": {problem} for num_partitions "
                                   f"= {partitions} (a sharding names devices 0..{partitions - 1}, a tile assignment "
                                   f"each of them once); XLA's HLO verifier would reject it inside the compile")
                    break

    def _check_sdy_sharding_devices(self, op, partitions: int) -> None:
        """Every mesh written inside an sdy sharding (``mesh<[], device_ids=[N]>``) names devices of the module
        (the ``sdy.mesh`` symbols a sharding names instead are checked where they are defined)."""
        for where, attrs in replica_shardings.places(op):
            for key in attrs:
                for mesh in shardy.inline_meshes(attrs[key]):
                    problem = _sdy_mesh_problem(mesh, partitions)
                    if problem:
                        self.error(op, f"{where}{op.name} has {key} = {attrs[key]}: {problem} for num_partitions = "
                                       f"{partitions} ({_SDY_DEVICES.format(last=partitions - 1, n=partitions)}); "
                                       f"XLA's HLO verifier would reject it inside the compile")
                        break

    def _check_mesh(self, op, replicas: int, partitions: int) -> None:
        mesh = shardy.read_mesh(op)
        if not mesh.axes:
            # An empty or maximal mesh (<[], device_ids=[N]>, as jax writes for host callbacks): no device count
            # of its own, one device of the module at most.
            problem = _sdy_mesh_problem(op.attributes["mesh"], partitions) if partitions > 1 else ""
            if problem:
                self.error(op, f"sdy.mesh {op.attributes['mesh']}: {problem} for num_partitions = {partitions} "
                               f"({_SDY_DEVICES.format(last=partitions - 1, n=partitions)}); XLA's HLO verifier "
                               f"would reject it inside the compile")
            return
        if replicas != 1 or mesh.size != partitions:
            self.error(op, f"sdy.mesh {mesh.body()} has {mesh.size} devices, but the module runs as {replicas} "
                           f"replicas x {partitions} partitions; XLA needs mhlo.num_partitions = {mesh.size} and "
                           f"mhlo.num_replicas = 1")

    def _collective_problems(self, op, replicas: int, partitions: int) -> list[str]:
        """What is wrong with a collective's groups (depends only on its name, group mode and groups)."""
        mode = device_groups.group_mode(op)
        n = device_groups.id_count(mode, replicas, partitions)
        what = f"{op.name} ({mode.value}, ids 0..{n - 1})"
        ids = device_groups.groups(op)
        if op.name == "mhlo.collective_permute":
            return _pair_problems(ids, n, what)
        if ids.size == 0:
            return []  # one group of every id (the op verifier rejects it where invalid)
        if (ids < 0).any() and (op.name != "mhlo.all_reduce" or not _padded_rows(ids)):
            return [f"{what}: replica groups have different sizes (padded with -1): {ids.tolist()}; only "
                    f"all_reduce may have groups of different sizes (-1 only after a group's ids)"]
        flat = ids[ids >= 0]
        bad = sorted({int(i) for i in flat if i >= n})
        if bad:
            return [f"{what}: ids {bad} are out of range for num_replicas = {replicas}, num_partitions = {partitions}"]
        values, counts = np.unique(flat, return_counts=True)
        if (counts > 1).any():
            return [f"{what}: ids {values[counts > 1].tolist()} appear in more than one group (groups must be disjoint)"]
        if len(values) != n:
            missing = sorted(set(range(n)) - set(values.tolist()))
            return [f"{what}: groups do not cover ids {missing}; every id must be in a group"]
        return []


def _groups_attr(op):
    """A collective's groups attribute (None when it has none): equal attributes are one object in MLIR."""
    name = device_groups.groups_attr_name(op)
    return op.attributes.get(name)


def _is_plain(name: str) -> bool:
    """An op name (of a dialect every form allows) that no check but the sharding attributes' is about."""
    dialect = name.split(".", 1)[0] if "." in name else "builtin"
    return dialect in ("builtin", "func", "mhlo") and name not in _CHECKED_NAMES


_CHECKED_NAMES = frozenset(("mhlo.custom_call", "func.func", shardy.MESH_OP, "mhlo.replica_id", "mhlo.partition_id",
                            *device_groups.MHLO_COLLECTIVES))


def _pair_problems(pairs, n: int, what: str) -> list[str]:
    if pairs.size == 0:
        return []
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        return [f"{what}: source_target_pairs must be an Nx2 array"]
    bad = sorted({int(i) for i in pairs.ravel() if not 0 <= i < n})
    if bad:
        return [f"{what}: ids {bad} are out of range"]
    problems = []
    for col, role in ((0, "source"), (1, "target")):
        vals, counts = np.unique(pairs[:, col], return_counts=True)
        if (counts > 1).any():
            problems.append(f"{what}: {role} ids {vals[counts > 1].tolist()} appear more than once")
    return problems


def _device_problem(sharding, partitions: int) -> str:
    """What is wrong with the devices ``sharding`` names ('' when nothing)."""
    if sharding.kind == "maximal":
        return f"device {sharding.device} is out of range" if sharding.device >= partitions else ""
    if sharding.kind != "tiled":
        return ""
    ids = np.array(sharding.devices)
    bad = sorted({int(i) for i in ids if i >= partitions})
    if bad:
        return f"devices {bad} are out of range"
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        return f"devices {values[counts > 1].tolist()} appear more than once in its tile assignment"
    if len(ids) != partitions:
        return f"its tile assignment names {len(ids)} devices, not {partitions},"
    return ""


_SDY_DEVICES = "a maximal mesh names one of devices 0..{last}, a mesh with axes all {n} of them"


def _sdy_mesh_problem(attr, partitions: int) -> str:
    """What is wrong with the devices a ``#sdy.mesh`` names ('' when nothing). Shardy's own verifier already
    makes a mesh with axes name each of its devices once."""
    mesh, ids = shardy.read_mesh_attr(attr), shardy.mesh_device_ids(attr)
    if not mesh.axes:
        return f"device {ids[0]} is out of range" if ids and ids[0] >= partitions else ""
    if mesh.size != partitions:
        return f"its mesh {mesh.body()} has {mesh.size} devices, not {partitions},"
    return ""


def _padded_rows(ids) -> bool:
    """Each group is one or more ids, then only -1 padding."""
    for row in ids:
        k = int((row >= 0).sum())
        if k == 0 or (row[:k] < 0).any() or (row[k:] != -1).any():
            return False
    return True
