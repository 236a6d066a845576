"""The signals a holder lives by.

SIGTERM, SIGINT or SIGHUP end a hold and destroy the RAM disk; SIGALRM
(``KEEP``) ends it *keeping* the RAM disk for a later holder.  (Not
SIGUSR1: between a holder and its process ``flux-imp run`` forwards TERM,
INT, HUP and ALRM as they are, but turns USR1 into SIGKILL.)

A holder blocks them first of all, so one that arrives while the RAM disk
is built waits, pending, and ends the wait at once: nothing is left
behind.  Processes a holder starts (servers, site scripts) must unblock
them (``unblock``): a blocked mask is inherited across exec.
"""

import signal

STOP = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
KEEP = signal.SIGALRM
ALL = STOP | {KEEP}


def block():
    signal.pthread_sigmask(signal.SIG_BLOCK, ALL)


def unblock():
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def stopping():
    """Told to stop while building (the stop signals wait, pending)?"""
    return bool(signal.sigpending() & STOP)


def wait():
    """Until a stop or keep signal; which one."""
    return signal.sigwait(ALL)


def take_stop():
    """Consume a pending stop signal (building stopped as it asked)."""
    signal.sigtimedwait(STOP, 0)


def linger(seconds):
    """Wait up to ``seconds`` for a signal (a failed task lets its error
    line reach the job's output before the job ends)."""
    signal.sigtimedwait(ALL, seconds)
