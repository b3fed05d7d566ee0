"""collective-bytes: the bytes each collective moves, per device and per device group.

A report, not a rewrite: for every ``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``collective_permute`` and
``collective_broadcast`` (mhlo or stablehlo, and 2022's
``mhlo.cross-replica-sum``) it emits a remark at the op and, with
``json=PATH``, writes every op and the totals to a JSON file. Before::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32} {
      func.func public @main(%x: tensor<1x3xi32>) -> tensor<4x3xi32> {
        %0 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64,
               replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
             : (tensor<1x3xi32>) -> tensor<4x3xi32>

After: the module unchanged, and::

    remark: all_gather: 2 groups of 4 devices; per device 12 B in, 48 B out, 36 B sent (ring: (n-1) * in);
            72 B sent in all

Per device, with ``n`` devices in its group, ``in``/``out`` the bytes of the
op's operands/results on one device (summed over a variadic op's values), the
bytes each device sends under the usual bandwidth-optimal algorithms:

======================  =========================  ====================================================
op                      sent per device            why
======================  =========================  ====================================================
all_reduce              ``2 (n-1)/n * in``         ring: a reduce-scatter, then an all-gather, of in/n pieces
all_gather              ``(n-1) * in``             ring: each device forwards the n - 1 pieces of others
reduce_scatter          ``(n-1)/n * in``           ring: n - 1 steps of in/n
all_to_all              ``(n-1)/n * in``           every piece but its own goes to its owner
collective_permute      ``in`` per pair it sources  one send per (source, target) pair; (d, d) sends nothing
collective_broadcast    ``(n-1)/n * in``           the source's in reaches n - 1 devices: an average
======================  =========================  ====================================================

"In all" is the sum over every device (``groups * n * sent``, or the pairs'
sends). Sizes count whole bytes per element (``i1`` is a byte, as XLA stores
``pred``; complex is twice its part). An op over a shape with a dynamic
dimension is reported without sizes. Groups are read as XLA reads them
(see ``pxla_mlir.passes.helpers``), devices numbered ``replica * partitions + partition``.

The JSON file holds ``ops`` (for each: ``op``, ``location``, ``mode``,
``groups``, ``group_size``, ``bytes_in``, ``bytes_out``,
``bytes_sent_per_device``, ``bytes_sent_total``), and ``totals`` overall,
``by_op`` and ``by_groups`` (the same groups under one key: which device
groups carry how much). Example::

    pxla-opt final.mlir --load-pass-plugin=examples/plugins/collective_bytes.py \\
        -p 'builtin.module(collective-bytes{json=bytes.json})'
"""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

from jaxlib.mlir import ir

from pxla_mlir.passes import ModulePass, PassError, helpers, option

_KINDS = ("all_reduce", "cross-replica-sum", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
          "collective_broadcast")
#: Bytes each device sends, as a multiple of its input bytes, for a group of n (collective_permute: per pair).
_SENT = {
    "all_reduce": lambda n: Fraction(2 * (n - 1), n),
    "all_gather": lambda n: Fraction(n - 1),
    "reduce_scatter": lambda n: Fraction(n - 1, n),
    "all_to_all": lambda n: Fraction(n - 1, n),
    "collective_broadcast": lambda n: Fraction(n - 1, n),  # (n-1) receivers of `in`, spread over the n devices
}
_FORMULA = {"all_reduce": "ring: 2(n-1)/n * in", "all_gather": "ring: (n-1) * in",
            "reduce_scatter": "ring: (n-1)/n * in", "all_to_all": "(n-1)/n * in",
            "collective_broadcast": "(n-1)/n * in on average", "collective_permute": "in per pair"}


@dataclasses.dataclass(frozen=True)
class CollectiveBytesPass(ModulePass):
    argument = "collective-bytes"
    summary = "Report the bytes each collective moves, per device and per device group (remarks, and JSON)"
    checks_only = True

    json: str = option("", "also write the report to this file (JSON); empty: remarks only")

    def run(self, module):
        replicas, partitions = helpers.device_counts(module)
        entries = []
        for op in helpers.collectives(module, _KINDS):
            entry = _measure(op, replicas, partitions)
            self.remark(op, _describe(entry))
            entries.append(entry)
        if self.json:
            report = {"num_replicas": replicas, "num_partitions": partitions, "ops": entries,
                      "totals": _totals(entries)}
            try:
                with open(self.json, "w", encoding="utf-8") as f:
                    json.dump(report, f, indent=1)
                    f.write("\n")
            except OSError as e:
                raise PassError(module, f"collective-bytes cannot write json={self.json}: {e.strerror}; give a "
                                        f"writable path, e.g. json=bytes.json") from None


def _measure(op: ir.Operation, replicas: int, partitions: int) -> dict:
    kind = "all_reduce" if helpers.kind(op) == "cross-replica-sum" else helpers.kind(op)
    bytes_in = _bytes(op.operands)
    bytes_out = _bytes(op.results)
    entry: dict = {"op": op.name, "location": str(op.location), "mode": helpers.group_mode(op),
                   "bytes_in": bytes_in, "bytes_out": bytes_out}
    if kind == "collective_permute":
        pairs = helpers.device_groups(op, replicas, partitions)
        moving = [p for p in pairs if p[0] != p[1]]
        entry.update(groups=pairs, group_size=2, formula=_FORMULA[kind])
        entry["bytes_sent_per_device"] = None if bytes_in is None else _per_source(moving, bytes_in)
        entry["bytes_sent_total"] = None if bytes_in is None else len(moving) * bytes_in
        return entry
    groups = helpers.device_groups(op, replicas, partitions)
    n = len(groups[0]) if groups else 0
    entry.update(groups=groups, group_size=n, formula=_FORMULA[kind])
    sent = None if bytes_in is None or not n else _SENT[kind](n) * bytes_in
    entry["bytes_sent_per_device"] = None if sent is None else _number(sent)
    entry["bytes_sent_total"] = None if sent is None else _number(sent * sum(len(g) for g in groups))
    return entry


def _per_source(pairs: list[list[int]], size: int) -> int:
    """The most any one device sends (a device may source several pairs)."""
    counts: dict[int, int] = {}
    for source, _ in pairs:
        counts[source] = counts.get(source, 0) + 1
    return max(counts.values(), default=0) * size


def _bytes(values) -> int | None:
    total = 0
    for v in values:
        t = v.type
        if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
            return None
        count = 1
        for d in t.shape:
            count *= d
        total += count * _element_bytes(t.element_type)
    return total


def _element_bytes(element: ir.Type) -> int:
    if isinstance(element, ir.ComplexType):
        return 2 * _element_bytes(element.element_type)
    width = element.width if isinstance(element, ir.IntegerType | ir.FloatType) else 64
    return max(1, (width + 7) // 8)


def _number(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


def _size(b) -> str:
    return "? B" if b is None else f"{b:g} B" if isinstance(b, float) else f"{b} B"


def _describe(e: dict) -> str:
    kind = e["op"].partition(".")[2]
    if kind == "collective_permute":
        moving = sum(1 for s, t in e["groups"] if s != t)
        where = f"{len(e['groups'])} pairs ({moving} between different devices)"
    else:
        where = f"{len(e['groups'])} group{'s' if len(e['groups']) != 1 else ''} of {e['group_size']} devices"
    return (f"{kind}: {where}; per device {_size(e['bytes_in'])} in, {_size(e['bytes_out'])} out, "
            f"{_size(e['bytes_sent_per_device'])} sent ({e['formula']}); {_size(e['bytes_sent_total'])} sent in all")


def _totals(entries: list[dict]) -> dict:
    def add(into: dict, key: str, e: dict) -> None:
        t = into.setdefault(key, {"ops": 0, "bytes_sent_total": 0})
        t["ops"] += 1
        if e["bytes_sent_total"] is None:
            t["unknown"] = t.get("unknown", 0) + 1
        else:
            t["bytes_sent_total"] += e["bytes_sent_total"]

    overall: dict = {}
    by_op: dict = {}
    by_groups: dict = {}
    for e in entries:
        add(overall, "all", e)
        add(by_op, e["op"].partition(".")[2], e)
        add(by_groups, json.dumps(e["groups"], separators=(",", ":")), e)
    return {**overall.get("all", {"ops": 0, "bytes_sent_total": 0}), "by_op": by_op, "by_groups": by_groups}
