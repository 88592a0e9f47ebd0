"""Round 121: the claims audit checks each claim against an index of the
successful calls (``safety._Successes``) instead of against every call. The
index must support exactly the claims the per-call rule supports (README,
final_answer_audit: numbers as numbers, exactly, however the answer writes
them; a number written as text compared as text to a claim with no number in
it; other values as text, case-insensitively); the rule is written out here
from the README, and the two are compared on generated calls and claims."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness.hooks.safety import _as_read, _number, _numbers, _Successes

PATTERN = re.compile(r"order (?P<order_id>\S+) refunded (?P<amount>.+?)\.", re.IGNORECASE)


def per_call(match: re.Match[str], calls: list[dict[str, Any]]) -> bool:
    """The rule, one call at a time."""

    def same(arg: Any, said: str) -> bool:
        if arg is None:
            return False
        said = _as_read(said)
        number = _number(str(arg)) if isinstance(arg, (int, float, str)) and not isinstance(arg, bool) else None
        if number is not None:
            claimed = _numbers(said)
            if claimed or not isinstance(arg, str):
                return number in claimed
        return _as_read(str(arg)).strip().casefold() == said.strip().casefold()

    named = {k: v for k, v in match.groupdict().items() if v is not None}
    return any(all(same(args.get(k), v) for k, v in named.items()) for args in calls)


IDS = st.sampled_from(["A-1", "a-1", "007", "7", "B-2", "ORDER-9"])
AMOUNTS = st.one_of(
    st.sampled_from([80, 80.0, 1200, 1.2, 12.5, 0, -3]),
    st.sampled_from(["80", "80.00", "1,200", "1.200,50", "007", "eighty", "12,50", " 80 ", "0,5", "1,2345"]),
    st.none(), st.booleans(),
)
SAID = st.sampled_from(["$80.00", "80", "€12,50", "1,200", "1.200", "1.200,50", "USD80", "eighty", "007",
                        "80 mil", "₹80", "EIGHTY", "-3", "0", "1'200", "1 200"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.fixed_dictionaries({"order_id": IDS, "amount": AMOUNTS}), max_size=5), IDS, SAID)
def test_the_index_supports_what_the_per_call_rule_supports(
    calls: list[dict[str, Any]], order: str, said: str,
) -> None:
    match = PATTERN.search(f"Order {order} refunded {said}.")
    assert match is not None
    assert _Successes(calls, PATTERN.groupindex, str).supports(match) == per_call(match, calls)
