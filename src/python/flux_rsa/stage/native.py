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
import os
import struct

from . import fsutil

LIBRARY = "_copybatch.so"
ENV = "FLUX_RSA_COPYBATCH"  # the library's path; empty: do not use one

# struct cb_file
_FILE = struct.Struct("=iiIIqqqIIII")
CHOWN, CHMOD = 1, 2
# batch flags
FADVISE, TMPFILE, LINK_PROC, WRITEBACK = 1, 2, 4, 8


class _Fail(ctypes.Structure):
    _fields_ = [("index", ctypes.c_int32), ("step", ctypes.c_int32),
                ("err", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("done", ctypes.c_int64)]


class _Names(ctypes.Structure):
    _fields_ = [("prefix", ctypes.c_char_p), ("suffix", ctypes.c_char_p),
                ("serial", ctypes.POINTER(ctypes.c_int64))]


_loaded = {}


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
        lib.cb_copy.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                ctypes.POINTER(_Names), ctypes.POINTER(_Fail)]
        lib.cb_copy.restype = ctypes.c_int
        lib.cb_scan.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        lib.cb_scan.restype = ctypes.c_int
        lib.cb_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.POINTER(_Fail)]
        lib.cb_verify.restype = ctypes.c_int
        lib.cb_set_dirs.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.cb_set_dirs.restype = None
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
            n = self.lib.cb_scan(fd, self.entries, self.room, self.names,
                                 len(self.names), ctypes.byref(self.used))
            if n >= 0:
                break
            if ctypes.get_errno() != errno.ENOBUFS:
                return None
            self._make_room(self.room * 4)
        names = ctypes.string_at(self.names, self.used.value).split(b"\0", n)[:n]
        stats = _ENTRY.iter_unpack(memoryview(self.entries)[:n * _ENTRY.size])
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
    """The cb_file flags of file F: CHOWN unless a new file gets F's owner
    anyway (OWNER, the (uid, gid) files created in its directory get), CHMOD
    for set-ID bits a chown clears; none unless CHOWN is true."""
    if not chown:
        return 0
    return (CHOWN if (f.uid, f.gid) != owner else 0) | (CHMOD if f.mode & 0o6000 else 0)


class Packed:
    """Files of one directory as records for the C loop, made in one
    process and sent to another (which sets the directories): RECS,
    NAMES, N files of NBYTES bytes."""

    def __init__(self, files, chown, owner):
        self.n = len(files)
        self.index = None  # the files' plan indices, kept by the parent
        self.nbytes = 0
        recs = bytearray(_FILE.size * self.n)
        names = bytearray()
        pack = _FILE.pack_into
        for k, f in enumerate(files):
            pack(recs, k * _FILE.size, 0, 0, len(names), f.mode & 0o7777, f.size,
                 f.atime, f.mtime, f.uid, f.gid, flags_of(f, chown, owner), 0)
            names += f.name + b"\0"
            self.nbytes += f.size
        self.recs = recs
        self.names = names

    def __getstate__(self):  # what a worker needs
        return dict(vars(self), index=None)

    def file(self, k, d, make):
        """File K as an object of the plan's kind (MAKE()), in directory D."""
        (_, _, off, mode, size, atime, mtime, uid, gid, _, _) = _FILE.unpack_from(
            self.recs, k * _FILE.size)
        f = make()
        f.d = d
        f.name = bytes(self.names[off:self.names.index(0, off)])
        f.mode, f.size, f.atime, f.mtime, f.uid, f.gid = mode, size, atime, mtime, uid, gid
        f.sparse = False
        f.key = f.src = None
        f.skip = False
        return f


class BatchCopier:
    """Copies batches of files with LIB in one worker.  WRITER is the
    worker's FileWriter (its settings and its copy of single files);
    SRC_IN_MEMORY says source reads need no announcing."""

    def __init__(self, lib, writer, src_in_memory):
        self.lib = lib
        self.writer = writer
        self.src_in_memory = src_in_memory
        self.serial = ctypes.c_int64(0)
        self.fail = _Fail()

    def copy(self, files, sdirs, ddirs, copy_one):
        """Copy FILES (eligible) from directories SDIRS into DDIRS (two
        _DirCache); COPY_ONE(f) copies one file the Python way."""
        i = 0
        while i < len(files):
            i = self._run(files, i, sdirs, ddirs, copy_one)

    def copy_packed(self, packed, sdir, ddir, copy_one):
        """Copy the files of PACKED (a Packed) from directory SDIR into DDIR;
        COPY_ONE(k) copies its file K the Python way."""
        self.lib.cb_set_dirs(_address(packed.recs), packed.n, sdir, ddir)
        start = 0
        while start < packed.n:
            done = start + self._call(packed.recs, start, packed.n - start, packed.names)
            if done < packed.n:
                copy_one(done)  # raises, or copied it
                done += 1
            start = done

    def _run(self, files, start, sdirs, ddirs, copy_one):
        """Copy files from START on, as far as the directory caches can keep
        their directories open at once; returns where to go on from."""
        w = self.writer
        recs = bytearray(_FILE.size * (len(files) - start))
        names = bytearray()
        pack = _FILE.pack_into
        rels = sdirs.plan.dirs
        n = 0
        for f in files[start:]:
            rel = rels[f.d].rel
            if _would_close(sdirs, rel) or _would_close(ddirs, rel):
                if n:
                    break
                sdirs.close()
                ddirs.close()
            ddir = ddirs.get(f.d)
            flags = flags_of(f, w.chown, w.chown and w.owner_of_new(f.d, ddir))
            pack(recs, n * _FILE.size, sdirs.get(f.d), ddir, len(names), f.mode & 0o7777,
                 f.size, f.atime, f.mtime, f.uid, f.gid, flags, 0)
            names += f.name + b"\0"
            n += 1
        done = self._call(recs, 0, n, names)
        if done < n:
            copy_one(files[start + done])  # raises, or copied it
            done += 1
        return start + done

    def _call(self, recs, start, n, names):
        """Run the C loop on N records from record START on; returns how
        many files it copied."""
        w = self.writer
        flags = (0 if self.src_in_memory else FADVISE) | (WRITEBACK if w.writeback else 0)
        if w.tmpfile:
            flags |= TMPFILE | (LINK_PROC if w.link is fsutil.link_proc else 0)
        nm = w.names
        self.serial.value = nm.serial
        tmp = _Names(fsutil.tmp_prefix(nm.tag, nm.pid), fsutil.TMP_SUFFIX,
                     ctypes.pointer(self.serial))
        rbuf = (ctypes.c_char * len(recs)).from_buffer(recs)
        nbuf = (ctypes.c_char * len(names)).from_buffer(names)
        try:
            return self.lib.cb_copy(ctypes.addressof(rbuf) + start * _FILE.size, n,
                                    ctypes.addressof(nbuf), flags, ctypes.byref(tmp),
                                    ctypes.byref(self.fail))
        finally:
            nm.serial = self.serial.value
            del rbuf, nbuf


def verify(lib, dst_root, packs, check_one):
    """Check the copies of the files of PACKS ((directory, Packed) pairs)
    under DST_ROOT by their names (cb_verify); CHECK_ONE(packed, k) checks
    file K of a Packed the Python way (it raises the verify error, or
    finds the file right after all)."""
    fail = _Fail()
    for rel, packed in packs:
        try:
            fd = fsutil.open_dir(dst_root, rel)
        except OSError:
            check_one(packed, 0)  # names what is wrong with the directory
            continue
        try:
            rbuf = (ctypes.c_char * len(packed.recs)).from_buffer(packed.recs)
            nbuf = (ctypes.c_char * len(packed.names)).from_buffer(packed.names)
            start = 0
            while start < packed.n:
                done = start + lib.cb_verify(ctypes.addressof(rbuf) + start * _FILE.size,
                                             packed.n - start, ctypes.addressof(nbuf), fd,
                                             ctypes.byref(fail))
                if done < packed.n:
                    check_one(packed, done)
                    done += 1
                start = done
            del rbuf, nbuf
        finally:
            os.close(fd)


def _address(buf):
    """The address of bytearray BUF's data (kept alive by the caller)."""
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def _would_close(cache, rel):
    """Whether getting REL from fsutil.DirCache CACHE closes the others."""
    return rel not in cache.fds and len(cache.fds) >= cache.MAX
