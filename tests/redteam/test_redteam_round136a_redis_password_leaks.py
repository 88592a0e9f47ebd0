"""Round 136a: round 135's "RedisStore named without its password" and "a URL redis-py
cannot use ... refused at construction", for passwords the way cloud consoles print them.

README Configuration, ``store``: "``RedisStore(url)`` (... a ``redis://``, ``rediss://`` or
``unix://`` URL, else refused; named without its password wherever it is told: the
model, a report, a log)". CHANGELOG round 135: "A URL redis-py cannot use ... refused at
construction".

Attack: the access key is base64 (``/`` in it, as Azure and others print keys), pasted
into the URL unencoded. ``_without_credentials`` and redis-py both split the URL at the
first ``/``: the part before it is read as the port (redis://) or the key sits in the
socket path (unix://), and ``_without_credentials`` sees no ``@`` in the netloc so it
masks nothing.
What happened: the store is built without a word; the first limited call tells the
model, the report, the caller's stream and the log ``Port could not be cast to integer
value as '<first 16 chars of the key>'`` (redis://) or ``Redis store
unix://:<whole key>@/...`` (unix://). Should: refused at construction (redis-py's own
``parse_url`` refuses it), and nothing of the key told anywhere.
"""
from __future__ import annotations

import io
import json
import logging

import pytest
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, Principal, RateLimit, RedisStore
from tests.scripted import ALLOW, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

KEY_HEAD, KEY_TAIL = "Zk9Qm2Lx7Rt4Wv8N", "c1Hs5Jd="
KEY = f"{KEY_HEAD}/{KEY_TAIL}"  # a base64 access key, as a cloud console prints it
URLS = {
    "redis": f"redis://svc:{KEY}@127.0.0.1:6399/1",
    "unix": f"unix://:{KEY}@/tmp/r136a-no-such.sock?db=1",
    "scheme_typo": f"reddis://svc:{KEY}@127.0.0.1:6399/1",  # refused: its error is printed (check-config, CI)
}


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q}"


@pytest.mark.parametrize("scheme", sorted(URLS))
async def test_a_key_with_a_slash_is_refused_or_never_told(scheme: str) -> None:
    try:
        store = RedisStore(URLS[scheme], timeout_s=1.0)
    except ValueError as exc:  # refused at construction, as the CHANGELOG says: fine if it names no key
        assert KEY_HEAD not in str(exc) and KEY_TAIL not in str(exc), str(exc)
        return
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    logging.getLogger("agentscope_harness").addHandler(handler)
    try:
        h = Harness(HarnessConfig(store=store, rate_limits=[RateLimit(scope="tool", tool="search", calls_per_min=5)]),
                    load_entry_points=False, environ={})
        toolkit = h.instrument(Toolkit(tools=[FunctionTool(search, permission=ALLOW)]))
        model = ScriptedModel([calls(("search", {"q": "a"})), text("done"), text("x")])
        agent = make_agent(model, toolkit, h.middlewares())
        with h.acting_for(Principal(user_id="u-42", tenant="acme")):
            events, _ = await run(agent, "find a")
    finally:
        logging.getLogger("agentscope_harness").removeHandler(handler)
    report = h.last_report(agent)
    told = model.calls[-1].last_result
    assert "[harness:dependency_down]" in told  # the control: the limit failed closed
    seen = {
        "model": json.dumps([c["formatted"] for c in model.calls], default=str),
        "report": report.model_dump_json(),
        "stream": json.dumps([getattr(e, "value", None) for e in events], default=str),
        "log": logged.getvalue(),
    }
    leaked = {where: part for where, text_ in seen.items() for part in (KEY_HEAD, KEY_TAIL) if part in text_}
    assert not leaked, (leaked, told)
