"""Test setup: make ``tests/scripted.py`` (and the scripted OpenAI-compatible
server of ``tests/realclient/server.py``) importable from every test folder,
serve that server to any test as the ``server`` fixture, keep the harness
env flags of the developer's shell out of the tests, and set aside what
earlier test modules left alive."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "realclient"))


@pytest.fixture(autouse=True, scope="module")
def _earlier_modules_frozen() -> None:
    """What earlier modules left alive is collected once and frozen: a full
    collection would otherwise scan the whole suite's heap (millions of
    objects, 300-450 ms on one step), a pause the timing tests would charge
    to the harness. Each module's own objects are still collected."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _clear_shared_tool_log() -> None:
    import scripted

    scripted.RAN.clear()


@pytest.fixture(autouse=True)
def _clean_harness_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HARNESS_") and not name.startswith("HARNESS_TEST_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    """The scripted OpenAI-compatible server AgentScope's real
    ``OpenAIChatModel`` talks to, listening on a free port of 127.0.0.1."""
    from server import FakeOpenAI

    async with FakeOpenAI.running() as fake:
        yield fake
