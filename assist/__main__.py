"""``python -m assist``: the same as the ``qm-mcp`` console script."""

import sys

from assist.main import main

sys.exit(main())
