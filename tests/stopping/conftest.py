"""The stopping tests drive real agents with the per-hook test kit."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "hooks"))
