"""The RAM disk of an RSA reservation: made and destroyed on an RSA node.

``python3 -m flux_rsa.ramdisk hold|purge|sweep|discard`` (see doc/pool.md).  The
holder subjob runs ``hold``: it builds ROOT/JOBID.GEN with the job owner's
``in/`` and ``out/``, prints ``{"event": "built", "path": ...}`` and keeps the
RAM disk until it is signalled.  Providers (how the space is made) are
chosen by name in ``providers``.
"""
