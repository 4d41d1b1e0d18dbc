"""``python -m console.cli`` is ``fabtop`` (tests use it to run the local tree)."""

import sys

from console.cli import main

sys.exit(main())
