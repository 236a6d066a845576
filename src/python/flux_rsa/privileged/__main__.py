"""python3 -m flux_rsa.privileged [--imp PATH]: a pool subjob's task."""

import sys

from flux_rsa.privileged.main import call

sys.exit(call())
