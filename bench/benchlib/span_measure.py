"""bench/span's measurements inside a mounted RAM disk: bandwidth, creates,
how much fits before ENOSPC, and the mix of file sizes two writers put
in at once (issue: a spanning RAM disk holds what was reserved).
"""

import errno
import multiprocessing
import os
import shutil
import subprocess
import time

MiB = 1 << 20
#: files written at once by write_read
WRITE_FILES = 8


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def write_read(where, total):
    """(write, read) bytes/s of WRITE_FILES files of total/WRITE_FILES."""
    each = total // WRITE_FILES
    block = os.urandom(MiB)
    t0 = time.monotonic()
    for i in range(WRITE_FILES):
        with open(os.path.join(where, f"w{i}"), "wb") as f:
            for _ in range(each // MiB):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
    write = total / (time.monotonic() - t0)
    drop_caches()
    t0 = time.monotonic()
    for i in range(WRITE_FILES):
        with open(os.path.join(where, f"w{i}"), "rb") as f:
            while f.read(4 * MiB):
                pass
    read = total / (time.monotonic() - t0)
    for i in range(WRITE_FILES):
        os.unlink(os.path.join(where, f"w{i}"))
    return write, read


def creates(where, count, keep=False):
    """Files of 4 KiB created per second (in 10 directories); ``keep``:
    leave them (``uncreate`` removes them), for what comes after to see
    them (an image's unmount writes them back)."""
    data = b"x" * 4096
    t0 = time.monotonic()
    for d in range(10):
        os.mkdir(os.path.join(where, f"d{d}"))
    for n in range(count):
        fd = os.open(
            os.path.join(where, f"d{n % 10}", f"f{n}"), os.O_WRONLY | os.O_CREAT, 0o644
        )
        os.write(fd, data)
        os.close(fd)
    rate = count / (time.monotonic() - t0)
    if not keep:
        uncreate(where)
    return rate


def uncreate(where):
    """Remove what ``creates`` made in ``where``."""
    for d in range(10):
        shutil.rmtree(os.path.join(where, f"d{d}"))


def fill(where, capacity):
    """The fraction of ``capacity`` a job can write in files of a quarter
    of one node's share each, until the first ENOSPC."""
    block = os.urandom(MiB)
    written = 0
    try:
        for i in range(10_000):
            with open(os.path.join(where, f"fill{i}"), "wb") as f:
                for _ in range(max(1, capacity // 4 // MiB)):
                    f.write(block)
                    written += MiB
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    for name in os.listdir(where):
        if name.startswith("fill"):
            os.unlink(os.path.join(where, name))
    return written / capacity


def _put(path, size, block):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while size:
            size -= os.write(fd, block[: min(size, len(block))])
    finally:
        os.close(fd)


def _writer(files, answer):
    """Write ``files`` ([(path, size)]) in order; tell (bytes, error)."""
    blocks = {}
    done, error = 0, None
    try:
        for path, size in files:
            if path.endswith("/"):
                os.mkdir(path)
                continue
            block = blocks.setdefault(min(size, MiB), os.urandom(min(size, MiB)))
            _put(path, size, block)
            done += size
    except OSError as exc:
        error = exc.strerror
    answer.put((done, error))


def mix(disk, share, small):
    """Issue 33 item 4's mix, 95% of the reserved capacity, from two
    compute nodes at once: one file of S + S/16 and ``small`` files of
    4 KiB from the first, files of S/8 from the second.  True when it all
    fit."""
    target = int(0.95 * disk.nodes * share)
    one, two = (os.path.join(p, "out") for p in disk.job_paths[:2])
    first = [(os.path.join(one, "big"), share + share // 16), (one + "/small/", 0)]
    first += [(os.path.join(one, "small", f"s{i}"), 4096) for i in range(small)]
    left = target - sum(size for _, size in first)
    second = []
    while left > 0:
        second.append(
            (os.path.join(two, f"eighth{len(second)}"), min(share // 8, left))
        )
        left -= share // 8
    answer = multiprocessing.Queue()
    writers = [
        multiprocessing.Process(target=_writer, args=(files, answer))
        for files in (first, second)
    ]
    for w in writers:
        w.start()
    results = [answer.get() for _ in writers]
    for w in writers:
        w.join()
    return sum(done for done, _ in results) == target
