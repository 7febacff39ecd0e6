"""``python -m statetrack.cli``."""

import sys

from statetrack.cli import main

sys.exit(main())
