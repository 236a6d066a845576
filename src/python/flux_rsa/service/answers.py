"""Futures answered once, let go as soon as their answer is handled.

Flux's Python ``Future.then`` gives its C continuation a handle that
refers back to the Future and keeps it in the Future: a reference cycle.
The Future (with the answer's message, which its C future holds, and the
callback with everything the callback closes over) then lives until a
full garbage collection, and the service puts those off to its quiet
moments (service.collector): every answer of a busy service would pile
up until then.  A future answered once (an RPC, a KVS commit) never calls
its continuation again, so once the callback has returned the handle can
go, and the Future with it.  A streaming future (an event watch) must
keep its handle: never pass one here.
"""


def on_answer(future, callback):
    """``future.then(callback)`` for a future answered once; returns it."""

    def handled(f):
        try:
            callback(f)
        finally:
            f.cb_handle = None  # breaks the cycle: freed when the caller lets go

    return future.then(handled)
