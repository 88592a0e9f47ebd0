"""Keeps every benchmark runnable: each one runs with tiny sizes and must
produce numbers. Timing and token goals are not asserted here (CI machines
are noisy and the sizes are tiny); the termination figures are deterministic,
so their goals are."""

from __future__ import annotations

import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import MODULES, budgets, overhead, prefix, redaction, scale, termination, tokens
from benchmarks._report import markdown


def numbers(section) -> list[float]:
    values = []
    for f in section.figures:
        assert f.harnessed is not None, f
        assert math.isfinite(f.harnessed), f
        values.append(f.harnessed)
        if f.bare is not None:
            assert math.isfinite(f.bare), f
            values.append(f.bare)
    assert values
    return values


async def test_overhead_produces_per_round_times():
    section = await overhead.run("quick")
    bare = section.data["samples"]["bare"]
    harnessed = section.data["samples"]["harnessed"]
    assert bare and harnessed
    assert all(w > 0 and c >= 0 for w, c in bare + harnessed)
    assert numbers(section)[0] > 0
    assert section.data["ratio"] > 0


async def test_tokens_counts_payloads_and_the_answer_is_still_given():
    section = await tokens.run("quick")
    numbers(section)
    bare, harnessed = section.data["bare"], section.data["harnessed"]
    assert bare.input_tokens > 0 and harnessed.input_tokens > 0
    assert bare.calls == tokens.SIZES["quick"]["rounds"]
    assert harnessed.calls == bare.calls - 1  # the finished answer needs no last call
    assert 0 <= harnessed.cached_tokens <= harnessed.input_tokens
    assert section.data["answered"] and section.data["completed"]
    assert bare.breaks == 0  # the bare agent only ever appends


async def test_prefix_breaks_are_counted_for_every_control_scenario():
    section = await prefix.run("quick")
    numbers(section)
    for name in prefix.SCENARIOS:
        data = section.data[name]
        assert data["stats"].calls > 0
        assert data["actions"].get("refuse", 0) >= 1  # control actions really happened
    assert section.data["control"]["actions"].get("swap_model", 0) >= 1


async def test_termination_goals_hold():
    section = await termination.run("quick")
    numbers(section)
    stubborn = section.data["stubborn"]
    assert stubborn["model_calls"] <= termination.GOAL_CALLS
    assert section.data["stubborn_bare"]["model_calls"] > termination.GOAL_CALLS
    assert section.data["dependency_after_first"] == 0
    # every stuck pattern stopped within its goal, the productive run never
    assert all(f.met for f in section.figures), [f.name for f in section.figures if not f.met]
    assert section.data["productive"]["state"] == "completed"
    assert not section.data["productive"]["narrowed"]


async def test_scale_reports_the_curve():
    section = await scale.run("quick")
    rows = section.data["rows"]
    assert [r[0] for r in rows] == list(scale.SIZES["quick"]["counts"])
    assert all(r[1] > 0 and r[3] > 0 and r[4] > 0 for r in rows)
    numbers(section)


async def test_redaction_reports_totals_and_loop_blocks():
    section = await redaction.run("quick")
    numbers(section)
    assert any("longest loop block" in f.name for f in section.figures)


async def test_budgets_status_line_beats_hints_alone():
    section = await budgets.run("quick")
    numbers(section)
    told, alone = section.data["told"], section.data["alone"]
    # deterministic: the status line ends every run sooner, with no waste
    assert told["calls"] < alone["calls"] and told["wasted"] == 0 < alone["wasted"]
    assert told["completed"] == 1 and alone["completed"] == 0


def test_markdown_table_lists_every_figure():
    from benchmarks._report import Figure, Section

    section = Section("x", figures=[Figure("b", "fig", 2.0, 4.0, goal="<= 1x", met=True)])
    text = markdown([section], "# head")
    assert "| b | fig | 2 | 4 | 0.500x | <= 1x | met |" in text


def test_the_command_runs(capsys):
    from benchmarks.__main__ import main

    assert MODULES == (
        "overhead", "tokens", "prefix", "termination", "scale", "redaction", "fleet", "injection_eval",
        "budgets",
        "large_results", "long_run", "concurrency",
    )
    with pytest.raises(SystemExit):
        main(["--only", "nope"])
    assert main(["--quick", "--only", "termination", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "stubborn model: model calls until stopped" in out and "goal <= 8 calls   met" in out


async def test_large_results_time_the_harness_and_the_loop_block():
    from benchmarks import large_results

    section = await large_results.run("quick")
    assert len(section.figures) == (2 * len(large_results.SIZES["quick"]) * (len(large_results.KINDS) + 1)  # + read whole
                                    + len(large_results.CRAFTED))  # a block each
    blocks = [f for f in section.figures if f.name.endswith("longest loop block")]
    assert all(f.harnessed > 0 and f.bare > 0 for f in blocks)


async def test_long_run_measures_the_start_and_the_end():
    from benchmarks import long_run

    section = await long_run.run("quick")
    numbers(section)
    start, end = section.data["alone"]
    assert start > 0 and end > 0
    assert section.data["rounds"] >= long_run.SIZES["quick"]["window"] * 2


async def test_concurrency_measures_cpu_gc_and_rss_in_child_processes():
    from benchmarks import concurrency

    section = await concurrency.run("quick")
    numbers(section)
    for bare, harnessed in section.data["rows"].values():
        for sample in (bare, harnessed):
            assert sample["cpu"] > 0 and sample["rss_kb"] > 0 and sample["rounds"] > 0


def test_the_instruction_count_runs_every_variant_and_reads_callgrind():
    """``python -m benchmarks.instructions`` (valgrind, minutes: not run
    here): its child runs each variant's replies inside its own C slot, and
    a slot's inclusive count is read from ``callgrind_annotate``'s line."""
    from benchmarks import instructions

    instructions._child(1)  # every variant replies (warm-up and counted) without valgrind
    line = ("598,565,316 (6.05%)  /tmp/Python-3.11.7/./Modules/_functoolsmodule.c:functools_reduce "
            "[/usr/lib/libpython3.11.so.1.0]")
    assert instructions._inclusive(line, "functools_reduce") == {"Ir": 598_565_316}
    shown = ("Events shown:     Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\n"
             "472,281,490 (3.49%)  140,194,404 (3.54%)  81,158,876 (3.66%)  9,833,553 (4.53%)  5,130,458 (3.51%)  "
             "1,604,753 (4.56%)  460,947 ( 0.27%)  0  316,964 (0.11%)  /tmp/bltinmodule.c:map_next [/usr/lib/libpython3.11.so]")
    assert instructions._inclusive(shown, "map_next") == {
        "Ir": 472_281_490, "Dr": 140_194_404, "Dw": 81_158_876, "I1mr": 9_833_553, "D1mr": 5_130_458,
        "D1mw": 1_604_753, "ILmr": 460_947, "DLmr": 0, "DLmw": 316_964,
    }
    with pytest.raises(RuntimeError):
        instructions._inclusive(line, "map_next")
