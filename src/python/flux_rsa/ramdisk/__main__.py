"""python3 -m flux_rsa.ramdisk hold|purge|sweep ... (see doc/pool.md)."""

import sys

from flux_rsa.ramdisk.cli import main

sys.exit(main())
