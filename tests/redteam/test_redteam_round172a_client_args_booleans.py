"""Round 172 a (a red team on round 171): the check of a number judged a boolean walked the
arguments again in Python (330,000 empty objects: 0.6 s on the event loop). It counts the
words ``true``/``false`` in the two JSON spellings now, in C."""
from __future__ import annotations

import gc
import json
import time
from typing import Any

import jsonschema
from agentscope._utils._common import _json_loads_with_repair
from hypothesis import given
from hypothesis import strategies as st

from agentscope_harness.client_arguments import _a_number_judged_a_boolean, read_one_way

ITEMS = {"type": "object", "properties": {
    "items": {"type": "array", "description": "rows as the app's grid takes them"},
    "dry_run": {"type": "boolean"},
}, "required": ["items"]}


def test_many_small_objects_under_a_schema_with_a_boolean_are_checked_as_fast_as_agentscope_reads_them():
    arguments = '{"items": [' + ",".join(["{}"] * 330_000) + '], "dry_run": false}'
    gc.collect()
    began = time.perf_counter()
    judged = _json_loads_with_repair(arguments, ITEMS)
    jsonschema.validate(judged, ITEMS)
    bare = time.perf_counter() - began
    gc.collect()
    began = time.perf_counter()
    one_way = read_one_way(arguments, judged, ITEMS)
    check = time.perf_counter() - began
    assert one_way and json.loads(arguments) == judged
    assert check < max(0.1, 3 * bare), f"check {check:.3f}s, AgentScope's own parse {bare:.3f}s"


SCALARS = st.one_of(st.integers(-3, 3), st.booleans(), st.text("truefalse\"", max_size=6), st.none(),
                    st.sampled_from([0.0, 1.0, 0.5]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text("truefals", max_size=5), inner, max_size=4)), max_leaves=20)


def _judged(value: Any, flips: list[bool]) -> Any:
    """``value`` with some of its 0s and 1s read as booleans, as AgentScope's repair reads them
    under a boolean of the schema (``flips``: which, in order)."""
    if isinstance(value, dict):
        return {key: _judged(item, flips) for key, item in value.items()}
    if isinstance(value, list):
        return [_judged(item, flips) for item in value]
    if type(value) in (int, float) and value in (0, 1) and flips and flips.pop():
        return bool(value)
    return value


@given(VALUES, st.lists(st.booleans(), max_size=20))
def test_a_number_read_as_a_boolean_anywhere_is_found_and_nothing_else(value: Any, flips: list[bool]):
    judged = _judged(value, list(flips))
    flipped = json.dumps(judged) != json.dumps(value)  # a boolean in judged where value has a number
    assert _a_number_judged_a_boolean(value, judged) is flipped
