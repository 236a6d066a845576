"""The stager's pool of forked worker processes (not flux_rsa.pool, the
RSA node pool): workers fed task numbers through a pipe (run), or tasks
made while they run through a socket (run_stream).  The tasks themselves
are tasks.py's.

Each worker runs ``handler(task_index, send)`` (run_stream: ``handler(task,
send)``) for the tasks it pulls; what it returns (unless None), and what
it passes to ``send`` before the task ends (progress), go to the parent's
``on_message``.  The first failure of any worker ends the run.  Fork (not
threads): small-file copying is Python-bound and the GIL would serialise
it.
"""

import collections
import mmap
import os
import pickle
import select
import signal
import socket
import struct

from .errors import EXIT_FAILED, StageError

_TASK = struct.Struct("=I")
_HDR = struct.Struct("=I")


class _Failed(collections.namedtuple("_Failed", "error")):
    """What a worker sends when it stops on ERROR (a StageError)."""

    __slots__ = ()


class _Worker:
    def __init__(self, pid, rfd):
        self.pid = pid
        self.rfd = rfd
        self.buf = b""
        self.eof = False


def run(ntasks, nworkers, handler, on_message, setup=None, poll=None, deaths=None):
    """Run tasks 0..NTASKS-1 on NWORKERS processes.

    ON_MESSAGE(result) is called in the parent with what each task
    returned (unless None) and what handlers send.  POLL() is called at
    least once a second.  Raises the first StageError.
    DEATHS, a list, gets the signal of each worker that was killed (then
    it may have left a task half done), failure or not.
    """
    if ntasks == 0:
        return
    _serve(
        max(1, min(nworkers, ntasks)),
        os.pipe(),
        os.close,
        lambda task_r, res_w, abort: _child(task_r, res_w, handler, setup, abort),
        lambda task_w: _Feed(task_w, ntasks),
        on_message,
        poll,
        deaths,
    )


def _serve(nworkers, ends, close, child, feed, on_message, poll, deaths):
    """What run() and run_stream() share: fork NWORKERS workers, each
    running CHILD(its end of the task channel, its result pipe, the abort
    flag), and serve them from the parent through FEED(the parent's end)
    until all is done.  ENDS: the task channel (the children's end, the
    parent's), each closed with CLOSE where it is not used; whatever is
    still open at the end is closed before the workers are reaped, so that
    a worker waiting for a task sees the channel end."""
    task_r, task_w = ends
    abort = mmap.mmap(-1, 1)  # shared with the children: 1 = stop pulling
    workers = []
    ok = False
    try:
        _fork(
            workers,
            nworkers,
            lambda: close(task_w),
            lambda res_w: child(task_r, res_w, abort),
        )
        close(task_r)
        task_r = None
        fed, task_w = feed(task_w), None
        _parent(fed, workers, on_message, poll, abort)
        ok = True
    finally:
        for end in (task_r, task_w):
            if end is not None:
                close(end)
        _reap(workers, ok, deaths)


def _fork(workers, nworkers, close_feed, child):
    """Fork NWORKERS children, appended to WORKERS as they start.  A child
    closes the parent's end of the task feed (CLOSE_FEED) and the result
    pipes of its elders, then runs CHILD(its result pipe) (which exits)."""
    for _ in range(nworkers):
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            close_feed()
            os.close(res_r)
            for w in workers:
                os.close(w.rfd)
            child(res_w)
        os.close(res_w)
        workers.append(_Worker(pid, res_r))


# a task message of run_stream() is at most this large (the socket's send
# buffer must hold one whole message)
MESSAGE_MAX = 192 << 10


def run_stream(
    produce, nworkers, handler, on_message, setup=None, poll=None, deaths=None
):
    """Like run(), for tasks made while the workers already run.

    PRODUCE() is called in the parent whenever it has nothing else to do,
    and returns a list of tasks (each picklable, at most MESSAGE_MAX bytes
    pickled) or None when there will be no more.  Each task goes to the
    first free worker, which calls HANDLER(task, send); the parent's
    ON_MESSAGE gets its result as with run().
    """
    task_r, task_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    task_w.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    _serve(
        max(1, nworkers),
        (task_r, task_w),
        socket.socket.close,
        lambda r, res_w, abort: _child(
            r.fileno(), res_w, handler, setup, abort, recv=_receiver(r)
        ),
        lambda w: _StreamFeed(w, produce),
        on_message,
        poll,
        deaths,
    )


def _receiver(sock):
    buf = bytearray(MESSAGE_MAX)
    view = memoryview(buf)

    def recv():
        n = sock.recv_into(buf)
        if n == 0:
            return None
        return pickle.loads(view[:n])

    return recv


class _StreamFeed:
    """The parent's end of run_stream(): tasks made by PRODUCE, queued, and
    sent as the socket takes them."""

    AHEAD = 256  # tasks queued before the parent stops producing

    def __init__(self, sock, produce):
        self.sock = sock
        self.fd = sock.fileno()
        self.produce = produce
        self.producing = True
        self.queue = collections.deque()
        sock.setblocking(False)

    @property
    def busy(self):
        """True while the parent should produce instead of waiting."""
        return self.producing and len(self.queue) < self.AHEAD

    def wants_write(self):
        return self.sock is not None and bool(self.queue)

    def push(self):
        if self.sock is None:
            return
        if self.busy:
            tasks = self.produce()
            if tasks is None:
                self.producing = False
            else:
                dumps = pickle.dumps
                for t in tasks:
                    data = dumps(t, protocol=pickle.HIGHEST_PROTOCOL)
                    if len(data) > MESSAGE_MAX:
                        raise StageError(
                            EXIT_FAILED,
                            None,
                            "internal error: a task "
                            f"of {len(data)} bytes is too large",
                        )
                    self.queue.append(data)
        while self.queue:
            try:
                self.sock.send(self.queue[0])
            except BlockingIOError:
                break
            self.queue.popleft()
        if not self.queue and not self.producing:
            self.close()

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            self.fd = -1


def _child(task_r, res_w, handler, setup, abort, recv=None):
    code = 0
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    def send(msg):
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        os.write(res_w, _HDR.pack(len(data)) + data)

    try:
        if setup is not None:
            setup(send)
        while True:
            if recv is not None:
                idx = recv()
                if idx is None or abort[0]:
                    break
            else:
                raw = os.read(task_r, _TASK.size)
                if not raw or abort[0]:
                    break
                (idx,) = _TASK.unpack(raw)
            result = handler(idx, send)
            if result is not None:
                send(result)
    except StageError as exc:
        send(_Failed(exc))
        code = 1
    except BaseException as exc:  # report, never hang the parent
        import traceback

        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        try:
            send(
                _Failed(
                    StageError(EXIT_FAILED, None, f"internal error in worker: {tb}")
                )
            )
        except OSError:
            pass
        code = 1 if not isinstance(exc, KeyboardInterrupt) else 130
    finally:
        os._exit(code)


def _parent(feed, workers, on_message, poll, abort):
    """Feed the workers and take their messages; on any failure tell them
    to stop pulling tasks.  The feed is closed either way."""
    try:
        _loop(feed, workers, on_message, poll, abort)
    except BaseException:
        abort[0] = 1
        raise
    finally:
        feed.close()


class _Feed:
    """The parent's end of the task pipe: task numbers written as they fit."""

    busy = False

    def __init__(self, fd, ntasks):
        self.fd = fd
        self.ntasks = ntasks
        self.next = 0
        self.pending = bytearray()
        os.set_blocking(fd, False)

    def wants_write(self):
        return self.fd >= 0

    def push(self):
        if self.fd < 0:
            return
        while len(self.pending) < 4096 and self.next < self.ntasks:
            self.pending += _TASK.pack(self.next)
            self.next += 1
        if self.pending:
            try:
                n = os.write(self.fd, self.pending)
                del self.pending[:n]
            except BlockingIOError:
                pass
        if not self.pending and self.next >= self.ntasks:
            self.close()

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _loop(feed, workers, on_message, poll, abort):
    error = None
    live = list(workers)
    while live:
        if error is None:
            feed.push()
        else:
            feed.close()
        wfds = [feed.fd] if feed.wants_write() else []
        wait = 0 if feed.busy and error is None else 1.0
        ready, _, _ = select.select([w.rfd for w in live], wfds, [], wait)
        for w in live:
            if w.rfd not in ready:
                continue
            data = os.read(w.rfd, 1 << 20)
            if not data:
                w.eof = True
                continue
            w.buf += data
            while len(w.buf) >= 4:
                (n,) = _HDR.unpack_from(w.buf)
                if len(w.buf) < 4 + n:
                    break
                msg = pickle.loads(w.buf[4 : 4 + n])
                w.buf = w.buf[4 + n :]
                if isinstance(msg, _Failed):
                    if error is None:
                        error = msg.error
                        abort[0] = 1
                elif error is None:
                    on_message(msg)
        live = [w for w in live if not w.eof]
        if poll is not None:
            poll()
    if error is not None:
        raise error


def _reap(workers, check, deaths=None):
    failed = None
    for w in workers:
        try:
            os.close(w.rfd)
        except OSError:
            pass
        try:
            _, status = os.waitpid(w.pid, 0)
        except ChildProcessError:
            continue
        if os.WIFSIGNALED(status):
            if deaths is not None:
                deaths.append(os.WTERMSIG(status))
            if failed is None:
                failed = os.WTERMSIG(status)
    if failed is not None and check:
        raise StageError(
            EXIT_FAILED, None, f"a worker process was killed by signal {failed}"
        )
