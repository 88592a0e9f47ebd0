"""``python -m agentscope_harness``: the same as the ``agentscope-harness`` command."""

import sys

from .cli import main

sys.exit(main())
