"""python3 -m flux_rsa.stage ... (see doc/stage.md)."""

import sys

from .cli import main

sys.exit(main())
