"""Round 171 a (a red team on round 170): client-run calls whose text a JSON reader reads other than the harness judged it.

README, Security, "Every call is gated": "as the client decodes the arguments itself, a call
whose text a JSON reader could read other than as it was judged (... `NaN`, `Infinity` or a
number beyond a double ...) is refused (`bad_arguments`, decision `client_arguments_check`
...) and never handed to the client".

The check (``client_arguments.read_one_way``) compares its own ``json.loads`` of the text with
AgentScope's parse using Python's ``==``, where ``1 == True`` and ``0 == False``; AgentScope's
schema repair (json_repair) turns a number 0/1 under a ``boolean`` property into a bool.
Integers go through ``json.loads``'s exact ``int`` (only floats meet ``_finite``).
"""
from __future__ import annotations

import gc
import json
from typing import Any

from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit
from scripted import ALLOW, make_agent

from agentscope_harness import Harness, HarnessConfig, Principal
from agentscope_harness.client_arguments import read_one_way
from agentscope_harness.testing import ScriptedModel, calls, text
from tests.perf.loopkit import longest_block


def client_tool(schema: dict[str, Any], name: str = "client_op") -> ToolBase:
    class ClientOp(ToolBase):
        description = "An operation the user's own app runs (a browser or a Go service)."
        input_schema = schema
        is_concurrency_safe = False
        is_read_only = False
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
            return ALLOW

    ClientOp.name = name
    return ClientOp()


async def handed(arguments: str, schema: dict[str, Any], *, harnessed: bool = True) -> tuple[list[str], list[str]]:
    """What the client is handed of a call with ``arguments``, and the report's refusals."""
    m = ScriptedModel([calls(("client_op", arguments)), text("done")])
    tool = client_tool(schema)
    if harnessed:
        h = Harness(HarnessConfig(), load_entry_points=False, environ={})
        agent = make_agent(m, h.instrument(Toolkit(tools=[tool])), h.middlewares())
    else:
        h = None
        agent = make_agent(m, Toolkit(tools=[tool]))
    got: list[str] = []

    async def reply() -> None:
        async for item in agent.reply_stream(UserMsg("user", "go")):
            if isinstance(item, RequireExternalExecutionEvent):
                got.extend(c.input for c in item.tool_calls)
                break

    if h is None:
        await reply()
        return got, []
    with h.acting_for(Principal(user_id="u-1")):
        await reply()
    report = h.last_report(agent)
    return got, list(report.refusals) if report else []


# ---------------------------------------------------------------------------------------
# 1. A number where the harness judged a boolean

DRY_RUN = {"type": "object", "properties": {"account": {"type": "string"}, "dry_run": {"type": "boolean"}},
           "required": ["account", "dry_run"]}


async def test_a_number_under_a_boolean_is_judged_a_bool_but_handed_as_a_number():
    """Promise: a call whose text a JSON reader could read other than as it was judged is
    refused (`bad_arguments`) and never handed to the client.

    Attack: the model writes `{"account": "A-1", "dry_run": 1}` for a client-run tool whose
    schema says `dry_run` is a boolean. AgentScope's schema repair turns 1 into `True`, so every
    gate judged a dry run (`dry_run=True`); the harness's check compares its own json.loads
    (`1`) with that using Python's `==`, and `1 == True`. The client is handed the text: a
    browser's JSON.parse reads the number 1 (`args.dry_run === true` is false: the real
    transfer), Python's json reads `1` (`is True` false), Go's encoding/json refuses the
    number for a bool field. Happened: handed as written. Should: refused `bad_arguments`.
    """
    text_ = '{"account": "A-1", "dry_run": 1}'
    assert json.loads(text_)["dry_run"] is not True  # what every JSON reader reads: a number
    got, refused = await handed(text_, DRY_RUN)
    assert got == [] and refused == ["bad_arguments"], (got, refused)


def test_the_check_itself_reads_a_number_as_the_bool_it_was_judged():
    """The same, at the check: read_one_way says a text with `0` reads one way as `False`."""
    assert not read_one_way('{"account": "A-1", "dry_run": 0}', {"account": "A-1", "dry_run": False}, DRY_RUN)


# ---------------------------------------------------------------------------------------
# 2. An integer beyond a double

AMOUNT = {"type": "object", "properties": {"account": {"type": "string"}, "amount": {"type": "number"}},
          "required": ["account", "amount"]}
HUGE = "1" + "0" * 400  # 1e400 written as an integer literal: no double holds it


async def test_an_integer_literal_beyond_a_double_is_never_handed():
    """Promise: "`NaN`, `Infinity` or a number beyond a double ... is refused".

    Attack: the amount written as an integer literal of 401 digits (`1` and 400 zeros), not
    as `1e400`. json.loads reads an exact Python int (only floats pass `_finite`), AgentScope
    judges the same int (json.dumps(allow_nan=False) accepts it), so the check passes. A
    browser's JSON.parse reads `Infinity` (node 20: `JSON.parse('{"n":1' + '0'.repeat(400) +
    '}').n === Infinity`); Go's encoding/json fails with an UnmarshalTypeError (ParseFloat's
    ErrRange) into float64, int64 or interface{}. `1e400` is refused, its integer spelling is
    handed. Should: refused `bad_arguments` as `1e400` is.
    """
    got, refused = await handed('{"account": "A-1", "amount": ' + HUGE + '}', AMOUNT)
    assert got == [] and refused == ["bad_arguments"], (got[:1] and got[0][:60], refused)


def test_the_check_passes_an_integer_beyond_a_double_but_refuses_its_float_spelling():
    assert not read_one_way('{"account": "A-1", "amount": 1e400}', {"account": "A-1", "amount": float("inf")}, AMOUNT)
    assert not read_one_way('{"account": "A-1", "amount": -' + HUGE + '}', {"account": "A-1", "amount": -int(HUGE)},
                            AMOUNT)


# ---------------------------------------------------------------------------------------
# 3. One cased character takes a long key off the fast path: the event loop held

TERMS = {"type": "object", "properties": {"terms": {"type": "object", "additionalProperties": {"type": "number"}}},
         "required": ["terms"]}


def _cycled(n: int) -> str:
    """``n`` characters cycling through 4,211 distinct ones (more than go_folded's 4,096-entry
    cache holds): ASCII (1 byte in UTF-8), Latin/Greek/Cyrillic/Hebrew/Arabic (2) and CJK (3)."""
    chars = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\'] + [chr(c) for c in range(0xA0, 0x800)] \
        + [chr(c) for c in range(0x4E00, 0x4E00 + 2200)]
    return "".join(chars[i % len(chars)] for i in range(n))


async def test_a_long_multilingual_key_holds_the_event_loop():
    """Promise (brief / round 170 a's CHANGELOG): the check is linear and cheap, "a key of no
    cased character (a CJK word) is folded in three C calls".

    Attack: one map key of ~395,000 characters (0.99 MB of UTF-8, the whole argument text
    under 1 MB) that starts with `Ω` and cycles through 4,211 distinct characters, next to a key
    named like the schema's field (`terms`, so every key is folded twice). The one cased
    character takes the key off the fast path: every character goes through the
    `lru_cache(4096)`-wrapped `_go_folded_char`, which misses on each (the cycle is longer
    than the cache). Measured here: read_one_way ~0.44 s; the harnessed reply's longest
    event-loop block ~0.48 s, the bare agent's ~0.03 s, the same size of uncased CJK ~0.02 s.
    Should: hold the loop well under 0.1 s (e.g. fold with `str.casefold()` for the whole
    key when it has no character Python folds fully, patching the few exceptions).
    """
    key = "Ω" + _cycled(395_000)
    arguments = json.dumps({"terms": {"terms": 1, key: 2}}, ensure_ascii=False)
    assert len(arguments.encode("utf-8")) < 1_000_000
    bare, gap = await least_block(arguments, harnessed=False), await least_block(arguments)
    assert gap < max(0.1, 3 * bare), f"harnessed loop block {gap:.3f}s, bare {bare:.3f}s"


async def least_block(arguments: str, *, harnessed: bool = True) -> float:
    """The least of three replies' longest loop blocks: a busy machine stretches
    one reply's block, never all three, and the defect's block (the fold of every
    character, ~0.44 s) is in every reply."""
    gaps = []
    for _ in range(3):
        gc.collect()
        gaps.append(await longest_block(handed(arguments, TERMS, harnessed=harnessed)))
    return min(gaps)


# ---------------------------------------------------------------------------------------
# 4. Go 1.27 folds by Unicode 17: case pairs Unicode 16 added to letters Python 3.11 knows

LAMBDA = {"type": "object", "properties": {"\u019bum": {"type": "string"}}}  # a field named `ƛum`


def test_a_unicode_16_capital_of_an_old_letter_folds_as_go_1_27_folds_it():
    """Promise: "keys fold as Go 1.21+ folds a field's name" (README); the check refuses "a key
    ... that is no field name the tool's schema declares but folds to one it declares".

    Attack: Unicode 16 gave old lowercase letters capitals: U+A7DC `Ƛ` for U+019B `ƛ`, U+A7CB
    `Ɤ` for U+0264 `ɤ`, U+1C89 for U+1C8A (Cyrillic TJE), and the Garay script. Go 1.27 ships
    Unicode 17 tables (reported by golang/go#77266's consumers: charlievieth/strcase#50 "Go
    1.27rc1 bumps unicode.Version to 17.0.0", hashicorp/hcl#814), so its foldName reads
    `"Ƛum"` into the struct field `ƛum`; Python 3.11's Unicode 14 leaves U+A7DC unassigned,
    go_folded keeps it apart and the harness judged the field left out. Not verified against
    Go's own tables here (the stored golang/go snapshot is Unicode 15.1): reasoned from the
    Unicode 16 UnicodeData/CaseFolding entries (A7DC; C; 019B) and maketables' orbit rule.
    Should: fold as the newest Go folds (a table of Unicode 16/17's simple foldings, as the
    three Unicode 15 pairs are), or say in README which Go versions the fold matches.
    """
    assert not read_one_way('{"\ua7dcum": "x"}', {"\ua7dcum": "x"}, LAMBDA)
    assert not read_one_way('{"a": {"\u0264": 1, "\ua7cb": 2}}', {"a": {"\u0264": 1, "\ua7cb": 2}})
