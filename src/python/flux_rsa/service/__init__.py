"""The thin service: wires Flux to the core (journal and pool events in,
actions out).  Nothing here decides a transition."""
