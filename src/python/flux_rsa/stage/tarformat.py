"""The POSIX pax archive format, written and read in bytes.

Every member gets a pax extended header carrying its exact path (any bytes,
flagged hdrcharset=BINARY when not UTF-8) and its mtime in nanoseconds, so an
archive keeps what a copy keeps.  Sparse files use the GNU sparse 1.0 layout
(a map block, then the data parts), which GNU tar also reads.
"""

import stat
import struct
import zlib

BLOCK = 512
RECORD = 10240
SHORT_PATHS = 300  # path+linkpath below this: the pax data fits one block

TYPE_FILE = b"0"
TYPE_HARDLINK = b"1"
TYPE_SYMLINK = b"2"
TYPE_CHAR = b"3"
TYPE_BLOCK = b"4"
TYPE_DIR = b"5"
TYPE_FIFO = b"6"
TYPE_PAX = b"x"
TYPE_GLOBAL = b"g"
TYPE_GNU_LONGNAME = b"L"
TYPE_GNU_LONGLINK = b"K"


def pad(n):
    """N rounded up to whole blocks."""
    return (n + BLOCK - 1) // BLOCK * BLOCK


def _record(key, value):
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(b"%d" % n) + len(body) != n:
        n += 1
    return b"%d" % n + body


def _ns(value):
    sec, frac = divmod(value, 1_000_000_000)
    if frac:
        return b"%d.%09d" % (sec, frac)
    return b"%d" % sec


def _utf8(data):
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


_USTAR = struct.Struct("100s8s8s8s12s12s8sc100s8s32s32s8s8s167s")
_MAX8 = 8**7  # values below this fit an 8-byte octal field
_MAX12 = 8**11  # ... a 12-byte one
_ZERO8 = b"0000000\0"
_ZERO12 = b"00000000000\0"
_CHKSUM_AT = 148


def _ustar(
    name, mode, uid, gid, size, mtime, typeflag, linkname=b"", devmajor=0, devminor=0
):
    """One ustar header block; values too large for their field are 0 here
    (the pax header carries them)."""
    mtime = max(mtime, 0)
    fields = (
        b"%07o\0" % (mode & 0o7777),
        b"%07o\0" % uid if uid < _MAX8 else _ZERO8,
        b"%07o\0" % gid if gid < _MAX8 else _ZERO8,
        b"%011o\0" % size if size < _MAX12 else _ZERO12,
        b"%011o\0" % mtime if mtime < _MAX12 else _ZERO12,
        b"%07o\0" % devmajor,
        b"%07o\0" % devminor,
    )
    name = name[:100]
    linkname = linkname[:100]
    # the checksum sums all 512 bytes (its own field as spaces): add up the
    # variable parts only, the constant ones are summed once in _CONST_SUM
    chk = _CONST_SUM + sum(name) + sum(linkname) + sum(typeflag) + sum(b"".join(fields))
    return _USTAR.pack(
        name,
        *fields[:5],
        b"%06o\0 " % chk,
        typeflag,
        linkname,
        b"ustar\x0000",
        b"",
        b"",
        fields[5],
        fields[6],
        b"",
    )


_CONST_SUM = sum(b"        ") + sum(b"ustar\x0000")


def header(
    path, mode, uid, gid, size, mtime_ns, typeflag, linkname=b"", rdev=0, sparse=None
):
    """All header blocks of one member (pax extended header + ustar).

    SIZE is the stored data size.  SPARSE is (realsize,) for a GNU sparse
    1.0 member whose stored data begins with its map block.
    """
    recs = []
    if not path.isascii() and not _utf8(path) or linkname and not _utf8(linkname):
        recs.append(_record(b"hdrcharset", b"BINARY"))
    if sparse is not None:
        recs.append(_record(b"GNU.sparse.major", b"1"))
        recs.append(_record(b"GNU.sparse.minor", b"0"))
        recs.append(_record(b"GNU.sparse.name", path))
        recs.append(_record(b"GNU.sparse.realsize", b"%d" % sparse[0]))
    else:
        recs.append(_record(b"path", path))
    if linkname:
        recs.append(_record(b"linkpath", linkname))
    recs.append(_record(b"mtime", _ns(mtime_ns)))
    if size >= _MAX12:
        recs.append(_record(b"size", b"%d" % size))
    if uid >= _MAX8:
        recs.append(_record(b"uid", b"%d" % uid))
    if gid >= _MAX8:
        recs.append(_record(b"gid", b"%d" % gid))
    data = b"".join(recs)
    base = path.rsplit(b"/", 1)[-1] or b"."
    mtime = mtime_ns // 1_000_000_000
    xname = (b"PaxHeaders/" + base)[:99]
    out = [
        _ustar(xname, 0o644, 0, 0, len(data), mtime, TYPE_PAX),
        data.ljust(pad(len(data)), b"\0"),
    ]
    if sparse is not None:
        head, _, tail = path.rpartition(b"/")
        name = (head + b"/" if head else b"") + b"GNUSparseFile.0/" + tail
    else:
        name = path
    out.append(
        _ustar(
            name,
            mode,
            uid,
            gid,
            size,
            mtime,
            typeflag,
            linkname,
            (rdev >> 8) & 0xFFF,
            (rdev & 0xFF) | ((rdev >> 12) & 0xFFF00),
        )
    )
    return b"".join(out)


def _rec_len(body):
    """Length of a pax record whose text after the length field is BODY
    bytes long (the length counts its own digits)."""
    if body <= 97:
        return body + 1 if body <= 8 else body + 2
    if body <= 996:
        return body + 3
    return len(_record(b"k", b"v" * (body - 4)))


_SPACES = b"        "
_MAGIC = b"ustar\x0000"
_PAX_NAME = b"PaxHeaders/"
_blocks = {}  # (mode, uid, gid, size, seconds, typeflag) -> (block, byte sum)


def _block(mode, uid, gid, size, sec, typeflag):
    """A ustar block without its name, with spaces for its checksum, and
    the sum of its bytes; the blocks of one batch share most fields, so
    these are kept (a few thousand at most)."""
    if len(_blocks) >= 4096:
        _blocks.clear()
    block = _USTAR.pack(
        b"",
        b"%07o\0" % mode,
        b"%07o\0" % uid,
        b"%07o\0" % gid,
        b"%011o\0" % size,
        b"%011o\0" % sec,
        _SPACES,
        typeflag,
        b"",
        _MAGIC,
        b"",
        b"",
        _ZERO8,
        _ZERO8,
        b"",
    )
    got = _blocks[(mode, uid, gid, size, sec, typeflag)] = (block, sum(block))
    return got


def header_into(buf, pos, path, mode, uid, gid, size, mtime_ns, typeflag):
    """Write the header blocks of a plain member (a file or a directory with
    a short name) into BUF at POS, where BUF holds zeros, and return their
    length: the same bytes as header() in 3 blocks.  Returns 0 (nothing
    written) for what header() must build: long or non-UTF-8 names, values
    too large for their ustar fields, times before 1970."""
    if (
        len(path) >= SHORT_PATHS
        or size >= _MAX12
        or uid >= _MAX8
        or gid >= _MAX8
        or not 0 <= mtime_ns < _MAX12 * 1_000_000_000
        or not path.isascii()
        and not _utf8(path)
    ):
        return 0
    sec, frac = divmod(mtime_ns, 1_000_000_000)
    text = b"%d.%09d" % (sec, frac) if frac else b"%d" % sec
    data = b"%d path=%b\n" % (_rec_len(len(path) + 7), path) + b"%d mtime=%b\n" % (
        _rec_len(len(text) + 8),
        text,
    )
    # each block: the shared part, then the name; a name of at most 100
    # bytes sums to at most 25,500, so adler32's low half is 1 + its sum
    block, total = _blocks.get((0o644, 0, 0, len(data), sec, TYPE_PAX)) or _block(
        0o644, 0, 0, len(data), sec, TYPE_PAX
    )
    name = (_PAX_NAME + (path.rsplit(b"/", 1)[-1] or b"."))[:99]
    end = pos + BLOCK
    buf[pos:end] = block
    buf[pos : pos + len(name)] = name
    buf[pos + 148 : pos + 156] = b"%06o\0 " % (
        total + (zlib.adler32(name) & 0xFFFF) - 1
    )
    buf[end : end + len(data)] = data
    pos = end + BLOCK
    mode &= 0o7777
    block, total = _blocks.get((mode, uid, gid, size, sec, typeflag)) or _block(
        mode, uid, gid, size, sec, typeflag
    )
    name = path[:100]
    buf[pos : pos + BLOCK] = block
    buf[pos : pos + len(name)] = name
    buf[pos + 148 : pos + 156] = b"%06o\0 " % (
        total + (zlib.adler32(name) & 0xFFFF) - 1
    )
    return 3 * BLOCK


def sparse_map(segments):
    """The GNU sparse 1.0 map block(s) for data SEGMENTS [(offset, length)]."""
    lines = [b"%d\n" % len(segments)]
    for off, n in segments:
        lines.append(b"%d\n%d\n" % (off, n))
    text = b"".join(lines)
    return text.ljust(pad(len(text)), b"\0")


def typeflag_of(mode):
    if stat.S_ISDIR(mode):
        return TYPE_DIR
    if stat.S_ISLNK(mode):
        return TYPE_SYMLINK
    if stat.S_ISCHR(mode):
        return TYPE_CHAR
    if stat.S_ISBLK(mode):
        return TYPE_BLOCK
    if stat.S_ISFIFO(mode):
        return TYPE_FIFO
    return TYPE_FILE


# ---- reading ---------------------------------------------------------------


def _num(field):
    if field and field[0] & 0x80:  # base-256 (GNU) for large values
        value = int.from_bytes(field[1:], "big")
        if field[0] & 0x40:
            value -= 1 << (8 * (len(field) - 1) + 6)
        return value
    text = field.split(b"\0", 1)[0].strip(b" ")
    return int(text, 8) if text else 0


def _cstr(field):
    return field.split(b"\0", 1)[0]


def _parse_pax(data):
    out = {}
    pos = 0
    while pos < len(data):
        sp = data.index(b" ", pos)
        n = int(data[pos:sp])
        rec = data[sp + 1 : pos + n - 1]
        key, _, value = rec.partition(b"=")
        out[key] = value
        pos += n
    return out


def _ns_of(text):
    sign = -1 if text.startswith(b"-") else 1
    whole, _, frac = text.lstrip(b"-").partition(b".")
    frac = (frac + b"000000000")[:9]
    return sign * (int(whole or b"0") * 1_000_000_000 + int(frac))


class Member:
    """One archive member as read: data_off is where its data starts."""

    __slots__ = (
        "path",
        "typeflag",
        "mode",
        "uid",
        "gid",
        "size",
        "mtime",
        "atime",
        "linkname",
        "rdev",
        "data_off",
        "segments",
        "realsize",
    )


class FormatError(Exception):
    pass


def members(buf):
    """Iterate over the Members of an archive held in BUF (bytes or mmap)."""
    pos = 0
    pax = {}
    glob = {}
    longname = longlink = None
    end = len(buf)
    while pos + BLOCK <= end:
        h = buf[pos : pos + BLOCK]
        if h.count(0) == BLOCK:
            return
        stored = _num(h[148:156])
        check = sum(h[:148]) + 8 * 32 + sum(h[156:])
        if stored != check:
            raise FormatError(f"bad header checksum at byte {pos}")
        typeflag = h[156:157]
        size = _num(h[124:136])
        data_off = pos + BLOCK
        if typeflag in (TYPE_PAX, TYPE_GLOBAL, TYPE_GNU_LONGNAME, TYPE_GNU_LONGLINK):
            data = bytes(buf[data_off : data_off + size])
            if typeflag == TYPE_PAX:
                pax = _parse_pax(data)
            elif typeflag == TYPE_GLOBAL:
                glob.update(_parse_pax(data))
            elif typeflag == TYPE_GNU_LONGNAME:
                longname = data.rstrip(b"\0")
            else:
                longlink = data.rstrip(b"\0")
            pos = data_off + pad(size)
            continue
        attrs = dict(glob)
        attrs.update(pax)
        m = Member()
        name = _cstr(h[0:100])
        prefix = _cstr(h[345:500]) if h[257:263] == b"ustar\x00" else b""
        if prefix:
            name = prefix + b"/" + name
        m.path = attrs.get(b"path", longname or name)
        m.linkname = attrs.get(b"linkpath", longlink or _cstr(h[157:257]))
        m.typeflag = typeflag if typeflag != b"\0" else TYPE_FILE
        if typeflag == b"7":
            m.typeflag = TYPE_FILE
        m.mode = _num(h[100:108])
        m.uid = int(attrs[b"uid"]) if b"uid" in attrs else _num(h[108:116])
        m.gid = int(attrs[b"gid"]) if b"gid" in attrs else _num(h[116:124])
        if b"size" in attrs:
            size = int(attrs[b"size"])
        m.size = size
        m.mtime = (
            _ns_of(attrs[b"mtime"])
            if b"mtime" in attrs
            else _num(h[136:148]) * 1_000_000_000
        )
        m.atime = _ns_of(attrs[b"atime"]) if b"atime" in attrs else m.mtime
        m.rdev = (_num(h[329:337]) << 8) | _num(h[337:345])
        m.data_off = data_off
        m.segments = None
        m.realsize = size
        if attrs.get(b"GNU.sparse.major") == b"1":
            m.path = attrs.get(b"GNU.sparse.name", m.path)
            m.realsize = int(attrs[b"GNU.sparse.realsize"])
            m.segments, maplen = _read_map(buf, data_off)
            m.data_off = data_off + maplen
        elif typeflag == b"S":
            raise FormatError(f"{m.path!r}: old GNU sparse members are not supported")
        yield m
        pax = {}
        longname = longlink = None
        pos = data_off + pad(size)


def _read_map(buf, off):
    nums = []
    pos = off
    need = None
    while need is None or len(nums) < need:
        nl = buf.find(b"\n", pos)
        if nl < 0:
            raise FormatError("truncated sparse map")
        nums.append(int(buf[pos:nl]))
        pos = nl + 1
        if need is None:
            need = 1 + 2 * nums[0]
    segs = [(nums[i], nums[i + 1]) for i in range(1, len(nums), 2)]
    return segs, pad(pos - off)
