"""Each reduction on small modules: what it lists as units, what applying a
subset of them leaves (always a module that verifies), and the values that
stand in for what it removes. jax-free and in-process: a reduction that
broke the IR would crash here, not in a user's reduction."""

import re

import pytest

from pxla_mlir.mlir.reduce.candidate import Printer, Size, digest
from pxla_mlir.mlir.reduce.catalog import default_reductions
from pxla_mlir.mlir.reduce.reductions import InlineRegions, RemoveOps, Rewrite
from pxla_mlir.mlir.reduce.signatures import OpsToArguments, RemoveArguments, RemoveFunctions, RemoveResults
from pxla_mlir.mlir.reduce.simplify import Cleanup, DropAttributes, SplatConstants

CHAIN = """
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<3xf32>, %n: tensor<3xi32>) -> tensor<3xf32> {
    %0 = stablehlo.tanh %x : tensor<3xf32>
    %1 = stablehlo.add %0, %x : tensor<3xf32>
    %2 = stablehlo.convert %n : (tensor<3xi32>) -> tensor<3xf16>
    %3 = stablehlo.convert %2 : (tensor<3xf16>) -> tensor<3xf32>
    %4 = stablehlo.multiply %1, %3 : tensor<3xf32>
    return %4 : tensor<3xf32>
  }
}
"""


def apply(reduction, text, chosen=None):
    """``text`` with the units at positions ``chosen`` (all by default) applied: (printed text, size), or None."""
    printer = Printer()
    module = printer.parse(text)
    with printer.ctx:
        units = reduction.units(module)
    picked = units if chosen is None else [units[i] for i in chosen]
    return printer.made(text, lambda m: reduction.apply(m, picked))


def units_of(reduction, text):
    printer = Printer()
    with printer.ctx:
        return reduction.units(printer.parse(text))


def ops(text):
    return re.findall(r"=\s*\"?([a-z_]+\.[a-z_]+)", text)


def test_remove_ops_lists_every_op_but_functions_and_terminators():
    assert len(units_of(RemoveOps(), CHAIN)) == 5  # tanh, add, two converts, multiply


def test_removed_results_are_replaced_by_an_operand_of_their_type_first():
    text, _ = apply(RemoveOps(), CHAIN, [1])  # the add: its operand %0 (the tanh) stands in
    assert "stablehlo.add" not in text
    assert re.search(r"%(\w+) = stablehlo.tanh %arg0[^$]*stablehlo.multiply %\1,", text)


def test_then_by_an_argument_then_by_a_shared_zero_of_the_type():
    text, size = apply(RemoveOps(), CHAIN)  # every op: the chain collapses onto the arguments
    assert ops(text) == []
    assert "return %arg0 : tensor<3xf32>" in text
    only_f16 = CHAIN.replace("%1 = stablehlo.add %0, %x", "%1 = stablehlo.add %0, %0")
    text, _ = apply(RemoveOps(), only_f16, [2])  # the f16 convert: no operand or argument is f16
    assert text.count("stablehlo.constant dense<0.000000e+00> : tensor<3xf16>") == 1
    two = CHAIN.replace("%3 = stablehlo.convert %2", "%3 = stablehlo.convert %2") \
        .replace("%4 = stablehlo.multiply %1, %3", "%5 = stablehlo.negate %2 : tensor<3xf16>\n"
                 "    %4 = stablehlo.multiply %1, %3")
    text, _ = apply(RemoveOps(), two, [2])
    assert text.count("tensor<3xf16>\n") >= 1 and text.count("stablehlo.constant") == 1  # made once, used twice


def test_a_final_mhlo_module_gets_mhlo_zeros():
    mhlo = """
      func.func public @main(%n: tensor<3xi32>) -> tensor<3xf32> {
        %0 = mhlo.convert %n : (tensor<3xi32>) -> tensor<3xf32>
        %1 = mhlo.tanh %0 : tensor<3xf32>
        return %1 : tensor<3xf32>
      }"""
    text, _ = apply(RemoveOps(), mhlo, [0])
    assert "mhlo.constant dense<0.000000e+00> : tensor<3xf32>" in text and "stablehlo" not in text


def test_an_op_whose_result_nothing_can_replace_stays():
    token = """
      func.func public @main() -> !stablehlo.token {
        %0 = stablehlo.create_token : !stablehlo.token
        return %0 : !stablehlo.token
      }"""
    text, _ = apply(RemoveOps(), token)
    assert "stablehlo.create_token" in text


WHILE = """
func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %w:2 = stablehlo.while(%i = %c, %t = %x) : tensor<i32>, tensor<3xf32>
   cond {
    %lim = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %lim : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %inc = stablehlo.add %i, %one : tensor<i32>
    %th = stablehlo.tanh %t : tensor<3xf32>
    stablehlo.return %inc, %th : tensor<i32>, tensor<3xf32>
  }
  return %w#1 : tensor<3xf32>
}
"""
CASE = """
func.func public @main(%k: tensor<i32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %r = "stablehlo.case"(%k) ({
    %a = stablehlo.tanh %x : tensor<3xf32>
    stablehlo.return %a : tensor<3xf32>
  }, {
    %b = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %b : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
"""


def test_inline_regions_inlines_a_loop_body_once_with_the_initial_values():
    assert units_of(InlineRegions(), WHILE) == [(3, 1)]  # module, main, constant, while: its body, not its
    # condition (which yields an i1)
    text, _ = apply(InlineRegions(), WHILE)
    assert "stablehlo.while" not in text and "stablehlo.compare" not in text
    assert re.search(r"stablehlo.add %c\w*, %c\w* : tensor<i32>", text)  # the counter's initial value, plus one
    assert re.search(r"%(\w+) = stablehlo.tanh %arg0 .*\n\s+return %\1", text)


def test_inline_regions_takes_one_branch_of_a_case():
    assert len(units_of(InlineRegions(), CASE)) == 2
    text, _ = apply(InlineRegions(), CASE, [1])
    assert "stablehlo.case" not in text and "stablehlo.negate %arg1" in text and "tanh" not in text


def test_remove_ops_drops_a_region_with_its_op():
    text, _ = apply(RemoveOps(), WHILE, [1])  # the while alone: its results become its initial values
    assert "stablehlo.while" not in text and "return %arg0" in text


FUNCTIONS = """
func.func private @helper(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.tanh %a : tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func public @main(%x: tensor<3xf32> {mhlo.sharding = "{replicated}"}, %y: tensor<3xf32>, %n: tensor<i32>)
    -> (tensor<3xf32> {jax.result_info = "a"}, tensor<i32> {jax.result_info = "b"}) {
  %0 = func.call @helper(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = stablehlo.add %0, %y : tensor<3xf32>
  return %1, %n : tensor<3xf32>, tensor<i32>
}
"""


def test_remove_functions_removes_the_calls_too():
    text, _ = apply(RemoveFunctions(), FUNCTIONS, [0])
    assert "@helper" not in text and "call" not in text
    assert "stablehlo.add %arg0, %arg1" in text  # the call's result: its operand


def test_arguments_and_results_of_called_functions_are_no_units():
    assert units_of(RemoveArguments(), FUNCTIONS) == [(1, 0), (1, 1), (1, 2)]
    assert units_of(RemoveResults(), FUNCTIONS) == [(1, 0), (1, 1)]


def test_remove_arguments_keeps_the_types_and_attributes_in_step():
    text, _ = apply(RemoveArguments(), FUNCTIONS, [0])  # %x: its uses go to %y, of its type
    assert re.search(r"@main\(%arg0: tensor<3xf32>, %arg1: tensor<i32>\)", text)
    assert "mhlo.sharding" not in text and "call @helper(%arg0)" in text
    text, _ = apply(RemoveArguments(), FUNCTIONS, [2])  # %n: no other i32, a zero
    assert "stablehlo.constant dense<0> : tensor<i32>" in text and "tensor<i32>)" not in text.split("->")[0]


def test_remove_results_rewrites_every_return():
    text, _ = apply(RemoveResults(), FUNCTIONS, [0])
    assert re.search(r"-> \(tensor<i32> \{jax.result_info = \"b\"\}\)", text)
    assert "return %arg2 : tensor<i32>" in text


def test_ops_of_uncalled_functions_become_new_arguments():
    assert len(units_of(OpsToArguments(), FUNCTIONS)) == 2  # @main's call and add; not the helper's tanh
    text, _ = apply(OpsToArguments(), FUNCTIONS, [0])  # the call: a new argument of its result type
    assert "call" not in text and re.search(r"@main\(%arg0: tensor<3xf32> \{mhlo.sharding = \"\{replicated\}\"\}, "
                                            r"%arg1: tensor<3xf32>, %arg2: tensor<i32>, %arg3: tensor<3xf32>\)", text)
    assert "stablehlo.add %arg3, %arg1" in text
    text, _ = apply(OpsToArguments(), CHAIN, [1])  # a module without arg_attrs gets none
    assert "arg_attrs" not in text and "%arg2: tensor<3xf32>" in text


def test_splat_constants_keeps_the_first_element_or_a_zero():
    text = """
      func.func @main() -> (tensor<3xf32>, tensor<2xbf16>, tensor<2xi32>, tensor<2xi1>) {
        %0 = stablehlo.constant dense<[1.5, 2.0, 3.0]> : tensor<3xf32>
        %1 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xbf16>
        %2 = mhlo.constant dense<[7, 8]> : tensor<2xi32>
        %3 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
        %4 = stablehlo.constant dense<5> : tensor<2xi32>
        return %0, %1, %2, %3 : tensor<3xf32>, tensor<2xbf16>, tensor<2xi32>, tensor<2xi1>
      }"""
    assert len(units_of(SplatConstants(), text)) == 4  # not the splat one
    out, _ = apply(SplatConstants(), text)
    assert "dense<1.500000e+00> : tensor<3xf32>" in out
    assert "dense<0.000000e+00> : tensor<2xbf16>" in out  # the bindings cannot read bf16 elements
    assert "dense<7> : tensor<2xi32>" in out and "dense<true> : tensor<2xi1>" in out


def test_drop_attributes_lists_only_what_an_op_verifies_without():
    text = """
      module @named attributes {mhlo.num_partitions = 4 : i32} {
        func.func public @main(%x: tensor<4xf32> {mhlo.sharding = "{replicated}", jax.buffer_donor = true})
            -> tensor<4xf32> {
          %0 = "stablehlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> ({
          ^bb0(%a: tensor<f32>, %b: tensor<f32>):
            %s = stablehlo.add %a, %b : tensor<f32>
            stablehlo.return %s : tensor<f32>
          }) {pxla.note = "x"} : (tensor<4xf32>) -> tensor<4xf32>
          return %0 : tensor<4xf32>
        }
      }"""
    units = units_of(DropAttributes(), text)
    names = {u[1] if len(u) == 2 else u[3] for u in units}
    assert names == {"mhlo.num_partitions", "sym_name", "mhlo.sharding", "jax.buffer_donor", "pxla.note"}
    out, _ = apply(DropAttributes(), text)
    assert "attributes" not in out.split("\n")[0] and "@named" not in out
    assert "mhlo.sharding" not in out and "pxla.note" not in out and "replica_groups" in out
    out, _ = apply(DropAttributes(), text, [i for i, u in enumerate(units) if u[-1] == "jax.buffer_donor"])
    assert 'mhlo.sharding = "{replicated}"' in out and "jax.buffer_donor" not in out


def test_cleanup_runs_jaxlibs_passes():
    dead = CHAIN.replace("return %4", "%9 = stablehlo.negate %4 : tensor<3xf32>\n    return %4")
    printer = Printer()
    text, _ = printer.made(dead, lambda m: Cleanup().apply_variant(m, "canonicalize,cse,symbol-dce"))
    assert "stablehlo.negate" not in text


@pytest.mark.parametrize("reduction", [r for r in default_reductions() if not isinstance(r, Rewrite)],
                         ids=lambda r: r.name)
def test_every_unit_alone_and_every_prefix_leaves_a_module_that_verifies_or_nothing(reduction):
    """Whatever subset is applied, the candidate is a verified module or None (never a crash)."""
    for text in (CHAIN, WHILE, CASE, FUNCTIONS):
        units = units_of(reduction, text)
        for chosen in [[i] for i in range(len(units))] + [list(range(k)) for k in range(len(units) + 1)]:
            made = apply(reduction, text, chosen)
            if made is not None:
                assert Printer().parse(made[0])  # it parses (and so verifies) again
                assert made[1] <= Size(10**9, 10**9)


def test_digests_tell_texts_apart():
    assert digest(CHAIN) == digest(str(CHAIN)) and digest(CHAIN) != digest(CHAIN + " ")
