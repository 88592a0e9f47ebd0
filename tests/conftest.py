"""Test setup: make ``tests/scripted.py`` importable from every test folder,
and keep the harness env flags of the developer's shell out of the tests."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _clear_shared_tool_log() -> None:
    import scripted

    scripted.RAN.clear()


@pytest.fixture(autouse=True)
def _clean_harness_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HARNESS_") and not name.startswith("HARNESS_TEST_"):
            monkeypatch.delenv(name, raising=False)
