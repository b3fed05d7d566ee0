"""Seeded, bounded fuzzing in the suite (tests/fuzzing/); `make fuzz` runs the long version.

The fuzzers run their cases in worker processes (tests/fuzzing/workers.py),
so a crash is reported as a failed case, never as the end of this run.
"""

import pytest
from fuzzing import opt_fuzz, program_fuzz, runtime_fuzz

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def test_pxla_opt_on_mutated_inputs_and_bad_pipelines_exits_0_or_1_or_2_with_a_located_error():
    report = opt_fuzz.run(seed=11, count=400)
    assert report.failures == [], "\n".join(f"case 11:{i}: {what}\n{detail[-600:]}"
                                            for i, what, detail in report.failures[:5])
    # 1: an error in the input; 2: one in the pipeline, a command-line mistake.
    assert set(report.outcomes) == {"exit 0", "exit 1, located error", "exit 2, located error"}
    assert report.outcomes["exit 0"] > 20
    # The classes the fuzzer is there for were all reached.
    errors = "\n".join(report.details)
    for reached in ("input nested more than 1000 levels deep", "the pipeline nests more than 64 levels",
                    "must be an integer attribute", "unknown pass or pipeline"):
        assert reached in errors, reached


def test_random_pmap_programs_match_nested_vmap():
    report = program_fuzz.run(seed=5, count=32)
    assert report.failures == [], "\n".join(f"program 5:{i}: {what}\n{detail}" for i, what, detail in report.failures)
    assert report.outcomes == {"match": 32}
    programs = [program_fuzz.make_program(5, i) for i in range(32)]
    # What the 32 programs cover: nesting, every collective, both modes and strategies, None and negative axes.
    kinds = {op.kind for p in programs for lv in p.levels for op in lv.ops}
    assert {"psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "all_to_all", "axis_index"} <= kinds
    assert {len(p.levels) for p in programs} == {1, 2, 3}
    assert {(p.mode, p.unshard) for p in programs} == set(program_fuzz.MODES)
    axes = [a for p in programs for lv in p.levels for a in (lv.in_axis, *lv.out_axes)]
    assert None in axes and any(a is not None and a < 0 for a in axes)


def test_random_fast_path_and_cache_scenarios_never_crash_or_give_other_numbers():
    """Each scenario in its own process: random placement, donation, deletion and threads on the C++ fast
    path; damaged, swapped and forged persistent cache entries."""
    report = runtime_fuzz.run(seed=3, count=4)
    assert report.failures == [], "\n".join(f"case 3:{i}: {what}\n{detail}" for i, what, detail in report.failures)
    assert report.outcomes == {"dispatch": 2, "cache": 2}
