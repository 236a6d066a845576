"""The RSA pool: a nested Flux instance on the RSA nodes whose Fluxion
accounts RAM-disk capacity as memory, and the agent inside it that runs
holders, stage and purge subjobs for the service (see doc/pool.md).

``launch`` is the service's side; ``agent`` runs inside the pool;
``protocol`` is the wire both use.
"""
