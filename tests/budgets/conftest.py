"""The real-client fixtures (``make_model``, ``real_agent``) of
``tests/realclient``, for the budget tests that assert on request bodies
(``server`` is every test's, from ``tests/conftest.py``)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "realclient"))

from realclient.conftest import make_model, real_agent

__all__ = ["make_model", "real_agent"]
