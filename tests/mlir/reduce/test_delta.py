"""The delta loop and its evaluator, in-process with the pipeline check as the
test: a large module with a two-op cause shrinks to the cause, the same way
every time and for every number of jobs, no text is tested twice, and Ctrl-C
keeps the best module found so far."""

import collections
import threading
import time

import pytest

from pxla_mlir.mlir.reduce.candidate import Printer, digest
from pxla_mlir.mlir.reduce.catalog import default_reductions
from pxla_mlir.mlir.reduce.delta import Reducer
from pxla_mlir.mlir.reduce.evaluate import Evaluator, Verdict
from pxla_mlir.mlir.reduce.pipeline_check import PipelineCheck

PIPELINE = "builtin.module(pxla-fold-shard-of-unshard)"
CAUSE = "so its result must be tensor<3xf32>, got tensor<3xf16>"


def big_module(steps: int) -> str:
    """A chain of about ``steps`` ops (elementwise ops, constants, calls, a loop every 40 steps) with an unshard
    and a shard of the wrong type two thirds of the way in: the only thing the pipeline fails on."""
    lines = ["module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {",
             "  func.func private @helper(%a: tensor<3xf32>) -> tensor<3xf32> {",
             "    %0 = stablehlo.tanh %a : tensor<3xf32>", "    return %0 : tensor<3xf32>", "  }",
             "  func.func public @main(%x: tensor<3xf32>, %n: tensor<i32>) -> (tensor<3xf32>, tensor<i32>) {"]
    prev = "%x"
    for i in range(steps):
        v = f"%v{i}"
        if i == 2 * steps // 3:
            lines += [f"    %g = mhlo.custom_call @pxla.unshard({prev}) {{pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, "
                      "pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<8x3xf32>",
                      "    %s = mhlo.custom_call @pxla.shard(%g) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, "
                      "pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf16>",
                      f"    {v} = stablehlo.convert %s : (tensor<3xf16>) -> tensor<3xf32>"]
        elif i % 40 == 39:
            lines += [f"    %c{i} = stablehlo.constant dense<0> : tensor<i32>",
                      f"    %w{i}:2 = stablehlo.while(%i{i} = %c{i}, %t{i} = {prev}) : tensor<i32>, tensor<3xf32>",
                      f"     cond {{\n      %lt{i} = stablehlo.compare LT, %i{i}, %n : (tensor<i32>, tensor<i32>) "
                      f"-> tensor<i1>\n      stablehlo.return %lt{i} : tensor<i1>",
                      f"    }} do {{\n      %th{i} = stablehlo.tanh %t{i} : tensor<3xf32>\n"
                      f"      stablehlo.return %i{i}, %th{i} : tensor<i32>, tensor<3xf32>\n    }}",
                      f"    {v} = stablehlo.add %w{i}#1, {prev} : tensor<3xf32>"]
        elif i % 7 == 3:
            lines += [f"    %k{i} = stablehlo.constant dense<[1.0, 2.0, {i}.0]> : tensor<3xf32>",
                      f"    {v} = stablehlo.multiply {prev}, %k{i} : tensor<3xf32>"]
        elif i % 11 == 5:
            lines.append(f"    {v} = func.call @helper({prev}) : (tensor<3xf32>) -> tensor<3xf32>")
        else:
            lines.append(f"    {v} = stablehlo.{('add', 'subtract', 'maximum')[i % 3]} {prev}, %x : tensor<3xf32>")
        prev = v
    lines += [f"    return {prev}, %n : tensor<3xf32>, tensor<i32>", "  }", "}"]
    return "\n".join(lines) + "\n"


class Recording:
    """The pipeline check as a runner (thread-safe), recording every text it tests."""

    def __init__(self, interrupt_after: int | None = None, delay: float = 0.0):
        self.check = PipelineCheck(PIPELINE)
        self.tested: list[str] = []
        self.interrupt_after, self.delay = interrupt_after, delay
        self.lock = threading.Lock()

    def test(self, text: str) -> Verdict:
        with self.lock:
            self.tested.append(digest(text))
            if self.interrupt_after is not None and len(self.tested) > self.interrupt_after:
                raise KeyboardInterrupt
        if self.delay:
            time.sleep(self.delay)
        return Verdict(any(CAUSE in f for f in self.check.report(text)["failures"]))

    def close(self):
        pass


def reduce(text: str, runner, jobs: int = 1):
    printer = Printer()
    first, size = printer.normalized(text)
    evaluator = Evaluator(runner, jobs)
    try:
        return Reducer(printer, evaluator, default_reductions()).run(first, size)
    finally:
        evaluator.close()


@pytest.fixture(scope="module")
def big():
    return big_module(600)


@pytest.fixture(scope="module")
def reduced(big):
    runner = Recording()
    return reduce(big, runner), runner


def test_a_large_module_with_a_two_op_cause_shrinks_to_the_cause(reduced):
    outcome, runner = reduced
    assert outcome.start.ops > 700 and not outcome.interrupted
    assert outcome.size.ops <= 10, outcome.text
    assert "@pxla.unshard" in outcome.text and "@pxla.shard" in outcome.text
    assert any(CAUSE in f for f in PipelineCheck(PIPELINE).report(outcome.text)["failures"])  # it still fails
    assert Printer().parse(outcome.text)  # it parses and verifies
    assert outcome.counts.tested == len(runner.tested) < 200


def test_no_text_is_tested_twice(reduced):
    outcome, runner = reduced
    assert collections.Counter(runner.tested).most_common(1)[0][1] == 1
    assert outcome.counts.repeats > 0  # the loop did make some texts again: the evaluator answered them


def test_the_result_is_the_same_every_time_and_for_every_number_of_jobs(big, reduced):
    outcome, _ = reduced
    again = reduce(big, Recording())
    assert again.text == outcome.text
    slow_first = reduce(big, Recording(delay=0.001), jobs=3)  # tests finish in other orders
    assert slow_first.text == outcome.text


def test_ctrl_c_keeps_the_best_module_so_far(big):
    outcome = reduce(big, Recording(interrupt_after=12))
    assert outcome.interrupted
    assert outcome.start.ops > outcome.size.ops > 10  # reduced some, not all the way
    assert any(CAUSE in f for f in PipelineCheck(PIPELINE).report(outcome.text)["failures"])


def test_verdicts_come_back_in_the_batch_order():
    class Slow:
        def test(self, text):
            time.sleep({"a": 0.15, "b": 0.0, "c": 0.05}[text])  # the first finishes last
            return Verdict(text == "b", text)

        def close(self):
            pass

    evaluator = Evaluator(Slow(), jobs=3)
    try:
        verdicts = evaluator.verdicts(["a", "b", "c", "b"])
    finally:
        evaluator.close()
    assert [v.detail for v in verdicts] == ["a", "b", "c", "b"]
    assert [v.interesting for v in verdicts] == [False, True, False, True]
    assert (evaluator.counts.tested, evaluator.counts.repeats) == (3, 1)
