"""``python -m web`` is ``turnvisor``."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:] if len(sys.argv) > 1 else ["serve"]))
