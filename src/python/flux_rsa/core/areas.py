"""The two areas of a RAM disk: the staged inputs and the job's outputs
(``ROOT/NAME/in``, ``ROOT/NAME/out``).  A module of their own: the
privileged entry point needs their names on every compute node and for
every attach, and nothing else of the core."""

IN_AREA = "in"
OUT_AREA = "out"
