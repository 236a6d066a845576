"""The RAM-disk providers, one module each (``core.providercaps`` lists
them; ``base`` is the interface they implement)."""
