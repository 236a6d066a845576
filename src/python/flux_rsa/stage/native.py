"""The stager's loops in C (src/stage/copybatch.c): batches of small files
copied, source directories scanned.

`make` builds them into this package as _copybatch.so.  Each file gets the
system calls filewrite.FileWriter makes, in the same order and with the
same guarantees; only the interpreter between them is gone.  Where the C
loop cannot copy a file it stops there and that file is copied by
FileWriter, which raises the stage's error (or copies it when the trouble
has passed), and the loop goes on with the rest.  A directory is scanned
(readdir, then an lstat of each entry) as plan.py would with os.scandir;
where that fails plan.py scans it itself, and says what failed.  Without
the library (not built, or FLUX_RSA_COPYBATCH set empty) the stager does
all of it in Python.
"""

import ctypes
import errno
import itertools
import operator
import os
import struct

from . import fsutil
from .filewrite import SET_ID

LIBRARY = "_copybatch.so"
ENV = "FLUX_RSA_COPYBATCH"  # the library's path; empty: do not use one

# struct cb_file
_FILE = struct.Struct("=IIqqqIIII")
CHOWN, CHMOD = 1, 2
# batch flags
FADVISE, TMPFILE, LINK_PROC, WRITEBACK, DIRECT = 1, 2, 4, 8, 16


class _Fail(ctypes.Structure):
    _fields_ = [
        ("index", ctypes.c_int32),
        ("step", ctypes.c_int32),
        ("err", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("done", ctypes.c_int64),
    ]


class _Names(ctypes.Structure):
    _fields_ = [
        ("prefix", ctypes.c_char_p),
        ("suffix", ctypes.c_char_p),
        ("serial", ctypes.POINTER(ctypes.c_int64)),
    ]


_loaded = {}


def _signatures():
    """The C functions: name -> (argument types, result type)."""
    c = ctypes
    return {
        "cb_copy": (
            [
                c.c_void_p,
                c.c_int,
                c.c_void_p,
                c.c_int,
                c.c_int,
                c.c_int,
                c.POINTER(_Names),
                c.POINTER(_Fail),
            ],
            c.c_int,
        ),
        "cb_scan": (
            [
                c.c_int,
                c.c_void_p,
                c.c_int,
                c.c_void_p,
                c.c_size_t,
                c.POINTER(c.c_size_t),
            ],
            c.c_int,
        ),
        "cb_verify": (
            [c.c_void_p, c.c_int, c.c_void_p, c.c_int, c.POINTER(_Fail)],
            c.c_int,
        ),
    }


def load():
    """The C loops (a ctypes library), or None when it is not there."""
    path = os.environ.get(ENV)
    if path is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY)
    if not path or not os.path.exists(path):
        return None
    lib = _loaded.get(path)
    if lib is None:
        lib = _loaded[path] = ctypes.CDLL(path, use_errno=True)
        for name, (args, result) in _signatures().items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, result
    return lib


# struct cb_entry: mode uid gid pad nlink size blocks atime_ns mtime_ns dev ino rdev
_ENTRY = struct.Struct("=IIIIQqqqqQQQ")


class Scanner:
    """Scans directories with LIB (cb_scan), into buffers that grow as
    directories need."""

    def __init__(self, lib, room=4096):
        self.lib = lib
        self._make_room(room)
        self.used = ctypes.c_size_t(0)

    def _make_room(self, n):
        self.room = n
        self.entries = ctypes.create_string_buffer(_ENTRY.size * n)
        self.names = ctypes.create_string_buffer(64 * n)

    def scan(self, fd):
        """The entries of directory FD but . and .., unsorted: a list of
        (name, (mode, uid, gid, 0, nlink, size, blocks, atime_ns, mtime_ns,
        dev, ino, rdev)); None if the scan failed."""
        while True:
            n = self.lib.cb_scan(
                fd,
                self.entries,
                self.room,
                self.names,
                len(self.names),
                ctypes.byref(self.used),
            )
            if n >= 0:
                break
            if ctypes.get_errno() != errno.ENOBUFS:
                return None
            self._make_room(self.room * 4)
        names = ctypes.string_at(self.names, self.used.value).split(b"\0", n)[:n]
        stats = _ENTRY.iter_unpack(memoryview(self.entries)[: n * _ENTRY.size])
        return list(zip(names, stats))


_scanners = {}


def scanner():
    """A Scanner of this process, or None without the library."""
    lib = load()
    if lib is None:
        return None
    s = _scanners.get(lib._name)
    if s is None:
        s = _scanners[lib._name] = Scanner(lib)
    return s


def eligible(f):
    """Whether the C loop copies file F: a whole file of the source tree
    (not an archive member, not a sparse file)."""
    return f.src is None and not f.sparse


def flags_of(f, chown, owner):
    """The cb_file flags of file F: with CHOWN true, CHOWN unless a new file
    gets F's owner anyway (OWNER, the (uid, gid) files created in its
    directory get); CHMOD for set-ID bits, set after the data and the owner
    (filewrite.created_mode)."""
    flags = CHOWN if chown and (f.uid, f.gid) != owner else 0
    return flags | (CHMOD if f.mode & SET_ID else 0)


class Packed:
    """Files of directory D as records for the C loops: RECS, NAMES, N files
    of NBYTES bytes.  Made where the files are known (the parent, or a
    worker), used where the directory is open."""

    def __init__(self, d, files, chown, owner):
        self.d = d
        self.n = len(files)
        self.nbytes = 0
        recs = bytearray(_FILE.size * self.n)
        names = bytearray()
        pack = _FILE.pack_into
        for k, f in enumerate(files):
            pack(
                recs,
                k * _FILE.size,
                len(names),
                f.mode & 0o7777,
                f.size,
                f.atime,
                f.mtime,
                f.uid,
                f.gid,
                flags_of(f, chown, owner),
                0,
            )
            names += f.name + b"\0"
            self.nbytes += f.size
        self.recs = recs
        self.names = names

    def fields(self, k):
        """(name, mode, uid, gid, atime, mtime, size) of file K."""
        (off, mode, size, atime, mtime, uid, gid, _, _) = _FILE.unpack_from(
            self.recs, k * _FILE.size
        )
        name = bytes(self.names[off : self.names.index(0, off)])
        return name, mode, uid, gid, atime, mtime, size

    def each(self, call, one):
        """Run CALL(recs, start, n, names) (addresses; it returns how many
        records it did) over all records; the record it stopped at goes to
        ONE(k) (which raises, or did it), and CALL goes on after it."""
        recs = (ctypes.c_char * len(self.recs)).from_buffer(self.recs)
        names = (ctypes.c_char * len(self.names)).from_buffer(self.names)
        try:
            start = 0
            while start < self.n:
                done = start + call(
                    ctypes.addressof(recs) + start * _FILE.size,
                    start,
                    self.n - start,
                    ctypes.addressof(names),
                )
                if done < self.n:
                    one(done)
                    done += 1
                start = done
        finally:
            del recs, names


class BatchCopier:
    """Copies files with LIB in one worker.  WRITER is the worker's
    FileWriter (its settings and its copy of single files); SRC_IN_MEMORY
    says source reads need no announcing."""

    def __init__(self, lib, writer, src_in_memory):
        self.lib = lib
        self.writer = writer
        self.src_in_memory = src_in_memory
        self.serial = ctypes.c_int64(0)
        self.fail = _Fail()

    def copy(self, files, sdirs, ddirs, copy_one, hidden=lambda d: False):
        """Copy FILES (eligible, in plan order) from directories SDIRS into
        DDIRS (two fsutil.DirsByIndex), one directory at a time; COPY_ONE(f)
        copies one file the Python way; HIDDEN(d): directory d is not seen
        yet, its files are created under their final names."""
        w = self.writer
        for d, run in itertools.groupby(files, key=_directory):
            run = list(run)
            ddir = ddirs.get(d)
            packed = Packed(d, run, w.chown, w.chown and w.owner_of_new(d, ddir))
            self.copy_packed(
                packed, sdirs.get(d), ddir, lambda k: copy_one(run[k]), hidden(d)
            )

    def copy_packed(self, packed, sdir, ddir, copy_one, hidden=False):
        """Copy the files of PACKED from directory SDIR into DDIR; COPY_ONE(k)
        copies its file K the Python way.  HIDDEN: DDIR is in a directory
        not seen yet (Copier), its files are created under their final
        names."""
        packed.each(
            lambda recs, start, n, names: self._call(
                recs, start, n, names, sdir, ddir, hidden
            ),
            copy_one,
        )

    def _call(self, recs, start, n, names, sdir, ddir, hidden):
        """Run the C loop on N records at address RECS (record START on),
        from directory SDIR into DDIR; returns how many files it copied."""
        w = self.writer
        flags = (0 if self.src_in_memory else FADVISE) | (
            WRITEBACK if w.writeback else 0
        )
        if hidden:
            flags |= DIRECT
        elif w.tmpfile:
            flags |= TMPFILE | (LINK_PROC if w.link is fsutil.link_proc else 0)
        nm = w.names
        self.serial.value = nm.serial
        tmp = _Names(
            fsutil.tmp_prefix(nm.tag, nm.pid),
            fsutil.TMP_SUFFIX,
            ctypes.pointer(self.serial),
        )
        try:
            return self.lib.cb_copy(
                recs,
                n,
                names,
                sdir,
                ddir,
                flags,
                ctypes.byref(tmp),
                ctypes.byref(self.fail),
            )
        finally:
            nm.serial = self.serial.value


def verify(lib, dst_root, rels, packs, check_one):
    """Check the copies of the files of PACKS (Packed) under DST_ROOT by
    their names (cb_verify); RELS[d] is directory d's path under it.
    CHECK_ONE(packed, k) checks file K of a Packed the Python way (it raises
    the verify error, or finds the file right after all)."""
    fail = _Fail()
    for packed in packs:
        try:
            fd = fsutil.open_dir(dst_root, rels[packed.d])
        except OSError:
            check_one(packed, 0)  # names what is wrong with the directory
            continue
        try:
            packed.each(
                lambda recs, start, n, names: lib.cb_verify(
                    recs, n, names, fd, ctypes.byref(fail)
                ),
                lambda k: check_one(packed, k),
            )
        finally:
            os.close(fd)


_directory = operator.attrgetter("d")
