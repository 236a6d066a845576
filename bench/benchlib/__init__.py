"""What the benchmarks in bench/ share, and the parts of the larger ones.

Not installed and not a test: each script puts bench/ first on sys.path
and imports benchlib from there.  Shared: system.py (commands that must
work, undoing what a run added to the machine), figures.py (sizes,
medians, how a figure is printed), slowfs.py (the slow persistent file
system; its loop device and throttle also for bench/pipeline) and
instance.py (a test instance running real jobs), for bench/thesis,
bench/campaign and bench/pipeline.  A module named after a script is a part
of that script alone.
"""

import os

#: bench/, where the scripts are
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the source (and build) tree
SRCDIR = os.path.dirname(BENCH)
#: where the tree's flux_rsa package is
PYPATH = os.path.join(SRCDIR, "src", "python")
#: the interpreter that runs jobs' tasks and the stager
PY = "/usr/bin/python3"
