"""Round 107 (b): a ``secret_env`` value with a trailing newline is taken
verbatim, so the credential itself is never redacted.

README "Configuration": ``secret_env`` names "environment variables whose values
are secrets (read at construction, where a value too short to redact fails the
config naming its variable and an unset, empty or blank one is skipped ...)";
"Keeps data where it belongs: secrets (... exact values) are redacted from tool
results, streams ...". A secret delivered from a file (``kubectl create secret
--from-file``, a Docker/K8s secret mount exported to the environment) carries
the file's trailing newline. ``HarnessConfig.resolved_secret_values`` (and
``Harness.refresh_secrets``) judge the value stripped (blank? too short?) but
hand the raw value, newline included, to the ``Redactor``: only
``"<secret>\\n"`` is redacted. A tool that uses the credential as it should
(stripped) and echoes it in an error (a DSN in a connection error) hands the
password to the model, the stream and the context, with no warning and no
refusal at construction."""

from __future__ import annotations

import os

import pytest

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

PASSWORD = "Corr3ct-Horse-Battery"


async def db_status(db: str) -> str:
    """Check a database's connection.

    Args:
        db (str): The database.
    """
    password = os.environ["DB_PASSWORD"].strip()  # as a client uses it
    return f"connect failed: auth error for postgres://app:{password}@db.internal/{db}"


@pytest.mark.parametrize("rotated", [False, True])
async def test_a_secret_env_value_from_a_file_is_redacted(monkeypatch: pytest.MonkeyPatch, rotated: bool) -> None:
    if not rotated:
        monkeypatch.setenv("DB_PASSWORD", PASSWORD + "\n")  # as mounted from a secret file
    h = Harness(HarnessConfig(secret_env=["DB_PASSWORD"]), load_entry_points=False, environ={})
    if rotated:  # set after construction: read again as the run opens
        monkeypatch.setenv("DB_PASSWORD", " " + PASSWORD + "\r\n")
    model = ScriptedModel([calls(("db_status", {"db": "orders"})), text("The orders database is down.")])
    agent = make_agent(model, [db_status], h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "is the orders db up?")
    seen_by_model = model.calls[-1].last_result
    assert "connect failed" in seen_by_model
    assert PASSWORD not in seen_by_model, seen_by_model
    assert PASSWORD not in str(events)
