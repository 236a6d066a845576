"""RAM disks on the RSA nodes, and on the compute nodes that use them.

``python3 -m flux_rsa.ramdisk hold|purge|sweep|discard`` (see doc/pool.md).
A holder subjob's tasks run ``holder.hold``: each builds its node's share
of ROOT/JOBID.GEN (task 0 with the job owner's ``in/`` and ``out/``),
prints ``{"event": "built", "path", "volume"}`` and keeps it until
signalled.  How the space is made and reaches compute nodes is a
provider's business (``providers``, listed in ``core.providercaps``); ``layout``
is what a RAM disk looks like on disk, ``disks`` removes one whatever made
it, ``mounts`` shares a compute node's mount between a job's ranks,
``gluster`` and ``sysmount`` are the engines the providers use.
"""
