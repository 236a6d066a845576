"""The tar archive format, read in bytes: pax, ustar and GNU members.

Paths and link targets come out as the archive's bytes (pax records
flagged hdrcharset=BINARY included), mtimes in nanoseconds from pax
records, sparse files in the GNU sparse 1.0 layout (a map block, then the
data parts), which is how GNU tar writes them for the stager's tar mode.
untar.py turns the members into a plan; the copy engine unpacks them.
bench/stage --tar measured this parser against tarfile's (doc/stage.md).
"""

BLOCK = 512

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
