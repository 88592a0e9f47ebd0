"""Progress is new information, not new noise (red team, behaviour pass).

A productive run reading long records that share most of their fields is
never called stalled (each record brings a new name and total: new content
in absolute terms, however small a share of the record). A result that
differs from the last only in volatile tokens (a request id, a latency, a
timestamp) is no progress: stall detection and the refusal ladder still
climb. A count of results (``count_results``) is not news either: the same
hits again are no progress."""

from __future__ import annotations

import json
import uuid
from itertools import count
from typing import Any

import pytest
from hookkit import Ran, drive, harnessed, hint_texts, results
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import calls, text

from agentscope_harness import HarnessConfig, Principal, ToolPolicy
from agentscope_harness.facts import SHINGLE_WORDS, Novelty

U1 = Principal(user_id="u-1", tenant="acme")
NAMES = [
    "Alice Martin", "Bob Chen", "Carla Diaz", "Dmitri Ivanov", "Eva Novak", "Farid Khan", "Grace Lee",
    "Hugo Silva", "Ines Costa", "Jonas Berg", "Kara Nilsen", "Liam Walsh", "Maya Patel", "Noah Kim",
    "Olga Petrova", "Pavel Horak", "Quinn Reed", "Rosa Lopez", "Sven Olsen", "Tara Singh", "Uma Rao",
    "Victor Hugo", "Wen Li", "Xena Park", "Yusuf Ali", "Zoe Adams", "Amir Haddad", "Bella Rossi",
    "Caleb Young", "Dana Fox",
]
DRIFT = "brought nothing new"
CONCLUDE = "Conclude now"


def _noise(i: int) -> tuple[str, str]:
    """A request id and a latency, different every call (deterministic)."""
    return str(uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15F39CC0605CEDC834 % 2**128)), f"{11 + 7 * i % 90}ms"


# ------------------------------------------------------------ productive


async def test_thirty_long_records_each_with_a_new_name_are_read_and_the_run_completes():
    """32-field records that share 30 fields: each brings a new customer
    (name, order total), under a fifth of its shingles but new content."""
    ran = Ran()

    async def get_customer(customer_id: str) -> str:
        """Fetch one customer record.

        Args:
            customer_id (str): The customer id.
        """
        ran.append(("get_customer", {"customer_id": customer_id}))
        i = int(customer_id.split("-")[1])
        record = {
            "customer_id": customer_id, "name": NAMES[i], "tier": "standard", "status": "active",
            "country": "DE", "currency": "EUR", "language": "de", "marketing_opt_in": False,
            "created_by": "import job", "source": "web shop", "payment_method": "card",
            "billing_cycle": "monthly", "account_manager": "team berlin", "risk_score": "low",
            "open_tickets": 0, "last_order_total": round(10 + 16.37 * i, 2),
            "notes": "no special handling required", "tax_exempt": False, "invoice_delivery": "email",
            "dunning_level": 0, "segment": "retail", "channel": "online", "consent_version": "2023-04",
            "kyc_status": "verified", "support_plan": "basic", "region": "EMEA",
            "timezone": "Europe/Berlin", "loyalty_program": "none", "referral_code": None,
            "email_verified": True, "phone_verified": True, "two_factor": "enabled",
        }
        return json.dumps(record, indent=1)

    script = [calls(("get_customer", {"customer_id": f"C-{i}"})) for i in range(30)]
    h, model, agent = harnessed(
        HarnessConfig(tools={"get_customer": ToolPolicy(role="lookup")}),
        [*script, text("30 customers, Alice Martin to Dana Fox.")], [get_customer],
    )
    _, final, report = await drive(h, agent)
    assert len(ran) == 30 and len(model.calls) == 31
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert final.get_text_content() == "30 customers, Alice Martin to Dana Fox."
    assert not any(d.hook == "drift_detector" for d in report.decisions)
    assert all(hint_texts(c) == [] for c in model.calls)


# ------------------------------------------------------------------ noise


def _catalogue_search(ran: Ran, answer: Any) -> Any:
    """A search tool recording what ran and answering ``answer(ran)``."""

    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return str(answer(ran))

    return search


@pytest.mark.parametrize("noisy", [False, True])
async def test_the_same_answer_with_a_new_request_id_and_latency_is_stalled(noisy: bool):
    """New query, same "no products match", a request id, a latency and a
    timestamp that change every call: stalled as if the noise were not there."""
    n = count()

    def answer(ran: Ran) -> str:
        rid, took = _noise(len(ran))
        head = f"Search {rid} completed in {took} at 2026-12-01T18:{len(ran) % 60:02d}:07Z. " if noisy else ""
        return head + "No products match your query. Try the store locator instead."

    search = _catalogue_search(Ran(), answer)
    h, model, agent = harnessed(
        HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}),
        [lambda turn: calls(("search", {"q": f"mug variant {next(n)}"}))], [search], repeat=True,
    )
    _, _, report = await drive(h, agent)
    assert len(model.calls) <= 9
    assert (report.terminal_state.value, report.reason) == ("incomplete", "stalled")
    hints = hint_texts(model.calls[-1])
    assert sum(DRIFT in h_ for h_ in hints) == 1 and CONCLUDE in hints[-1]
    assert model.calls[-1]["tool_choice"].mode == "none"


async def test_an_ignored_refusal_beside_a_noisy_status_call_is_stopped():
    """Each turn a refused cancel and a status call whose result carries a
    request id and a latency: the noise is no progress, so meeting the
    refusal again escalates and the run ends ``refused:permission_denied``."""
    ran = Ran()

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        ran.append(("cancel_order", {"order_id": order_id}))
        return "cancelled"

    async def status(service: str) -> str:
        """Service status.

        Args:
            service (str): Which service.
        """
        ran.append(("status", {"service": service}))
        rid, took = _noise(len(ran))
        return f"Status check request_id={rid[:8]} done in {took}: all systems operational, no incidents."

    n = count()
    h, model, agent = harnessed(
        HarnessConfig(tools={
            "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}),
            "status": ToolPolicy(role="lookup"),
        }),
        [lambda turn: calls(("cancel_order", {"order_id": f"B-{(i := next(n))}", "user_id": "u-2"}),
                            ("status", {"service": f"orders-{i}"}))],
        [cancel_order, status], repeat=True,
    )
    _, final, report = await drive(h, agent, U1)
    assert len(model.calls) <= 4
    assert ran.of("cancel_order") == []
    assert (report.terminal_state.value, report.reason) == ("incomplete", "refused:permission_denied")
    assert any("refused again (permission_denied)" in h_ for h_ in hint_texts(model.calls[2]))
    assert "[harness:" not in final.get_text_content()


@pytest.mark.parametrize("enough", [None, 5])
async def test_counted_results_are_no_progress_when_they_are_the_same_hits_again(enough: int | None):
    """``count_results`` says three hits every call; they are the same
    three: stalled, with or without ``enough_candidates`` (whose gate may
    refuse and latch open: the ladder stops the run all the same)."""
    n = count()
    search = _catalogue_search(Ran(), lambda ran: "red mug\nblue mug\ngreen mug")
    h, model, agent = harnessed(
        HarnessConfig(
            tools={"search": ToolPolicy(role="retrieval", count_results=lambda t: len(t.splitlines()))},
            enough_candidates=enough,
        ),
        [lambda turn: calls(("search", {"q": f"mug {next(n)}"}))], [search], repeat=True,
    )
    _, _, report = await drive(h, agent)
    assert len(model.calls) <= 9
    assert (report.terminal_state.value, report.reason) == ("incomplete", "stalled")
    assert "red mug" in results(model)[0]


# ---------------------------------------------------------------- the rule

_PLAIN = st.sampled_from(["red", "mug", "kettle", "steel", "the", "of", "price", "eur", "12", "stock", "ok"])


def _volatile(i: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.uuids().map(str),
        st.uuids().map(lambda u: u.hex[: 8 + i % 20] + "7a"),  # a hex id has a letter: a number is data
        st.integers(1, 99_999).map(lambda v: f"{v}ms"),
        st.integers(1, 9_999).map(lambda v: f"{v} ms"),
        st.floats(0.001, 99, allow_nan=False).map(lambda v: f"{v:.3f}s"),
        st.datetimes().map(lambda d: d.isoformat(timespec="seconds") + "Z"),
        st.times().map(lambda t: t.isoformat(timespec="milliseconds")),
        st.uuids().map(lambda u: f"request_id={u.hex[:10]}"),
        st.uuids().map(lambda u: f"trace-id: {u.hex}"),
        st.binary(min_size=16, max_size=24).map(lambda b: "tok_" + b.hex().upper()[:6] + b.hex()[6:] + "9x"),
    )


@st.composite
def _templates(draw: Any) -> list[Any]:
    """Plain words and volatile slots (``None``), in any order."""
    return draw(st.lists(st.one_of(_PLAIN, st.none()), min_size=1, max_size=40))


def _fill(template: list[Any], draw: Any) -> str:
    return " ".join(w if w is not None else draw(_volatile(i)) for i, w in enumerate(template))


@settings(max_examples=300, deadline=None)
@given(_templates(), st.data(), st.data())
def test_a_result_that_differs_only_in_volatile_tokens_is_never_progress(template, first, later):
    seen = Novelty()
    seen.add(_fill(template, first.draw))
    for _ in range(3):
        assert not seen.add(_fill(template, later.draw))


_NEW = st.text(alphabet="ghijklnopqrvwxyz", min_size=3, max_size=8).map(lambda w: "zq" + w)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PLAIN, min_size=0, max_size=400), st.integers(min_value=0), _NEW, _NEW)
def test_a_result_with_a_new_two_word_phrase_inside_it_is_progress(words, at, a, b):
    """However long the rest; anywhere in a short result, and inside a long
    one (at its very edge a phrase is in fewer shingles: see NOVEL_SHINGLES)."""
    seen = Novelty()
    seen.add(" ".join(words))
    edge = SHINGLE_WORDS - 1
    at = at % (len(words) + 1) if len(words) < 2 * edge else edge + at % (len(words) - 2 * edge + 1)
    assert seen.add(" ".join([*words[:at], a, b, *words[at:]]))


def test_one_changed_word_in_a_long_result_is_not_new_but_two_are():
    seen = Novelty()
    page = " ".join(f"word{i}" for i in range(200))
    assert seen.add(page)
    assert not seen.add(page.replace("word100", "changed"))
    assert seen.add(page.replace("word50", "another").replace("word150", "thing"))


@pytest.mark.parametrize("older, newer", [
    ("account balance 12345678 cents", "account balance 87654321 cents"),  # a number of 8+ digits is data
    ("iphone15手机壳北京仓库有货", "iphone15手机壳上海仓库有货"),  # a sentence without spaces is no id
])
def test_numbers_and_words_in_other_scripts_are_data_not_ids(older: str, newer: str):
    seen = Novelty()
    seen.add(older)
    assert seen.add(newer)


def test_the_echo_discounted_is_a_querys_not_a_batch_of_thousands():
    from agentscope_harness.facts import ECHO_PHRASES, ECHO_WORDS, _echoed

    batch = {"order_ids": [f"ORD {i}" for i in range(2000)], "note": " ".join(["word"] * 50)}
    phrases = _echoed(batch)
    assert len(phrases) == ECHO_PHRASES
    assert all(len(p) <= ECHO_WORDS for p in phrases)
    assert _echoed({"q": "red mug", "again": "red mug"}) == [("red", "mug")]
