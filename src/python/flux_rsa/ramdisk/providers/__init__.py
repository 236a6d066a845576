"""The RAM-disk providers, one module each (``ramdisk.registry`` lists
them; ``base`` is the interface they implement)."""
