"""bench/stage --tar: the stager's own tar writer and reader against GNU tar
and Python's tarfile, on bench/stage's datasets.

Rows "tar out" (the dataset in the tmpfs written as one archive on the
disk: the stager's tar mode) and "tar in" (one archive on the disk
unpacked into the tmpfs: the stager's untar mode), each tool with and
without the check it makes of its own work:

  out  stager tar        --verify size (the default): the archive against
                         its layout, the workers' byte counts
       stager tar -c     --verify checksum: the archive read back, every
                         member's content hashed against the tree
       GNU tar           tar --format=pax --sparse -cf (pax, as the stager
                         writes; sparse files found, as the stager does)
       GNU tar -W        the same with --verify: the archive read back and
                         compared with the tree
       tarfile           tarfile.open(mode "w", PAX_FORMAT).add(SRC):
                         one process, no check
  in   stager untar      --verify size: every file's size and mtime, every
                         link, checked in the tree written
       stager untar -c   --verify checksum: also every file's content
       GNU tar           tar -xf
       GNU tar -d        tar -xf, then tar -df (--compare: every member's
                         size, mode, mtime and content against the tree)
       tarfile           tarfile.open().extractall(): one process, no check

The archive of a "tar in" row is made once with GNU tar in its default
format (what a user's `tar cf` gives) under /tmp/rsa-bench-data/tar-KEY.
Every command is followed by sync and the page cache is dropped before it,
as in bench/stage's other rows.

Row "parse" times the reader alone, in this process, with the archive in
the page cache: the stager's parser (tarformat.members over the mapped
archive) against tarfile's (iterating a TarFile), on the archive of each
"tar in" row and on one the stager wrote (pax, 3 blocks a member).
"""

import mmap
import os
import statistics
import tarfile
import time

from benchlib import PY

STAGER = "PYTHONPATH={{pypath}} {py} -m flux_rsa.stage {mode} {{src}} {{dst}}{opts}"
_WRITE = (
    "import sys, tarfile\n"
    "t = tarfile.open(sys.argv[2], 'w', format=tarfile.PAX_FORMAT)\n"
    "t.add(sys.argv[1], arcname='.')\n"
    "t.close()"
)
_EXTRACT = (
    "import sys, tarfile\n"
    "t = tarfile.open(sys.argv[1])\n"
    "t.extractall(sys.argv[2], numeric_owner=True)\n"
    "t.close()"
)
GNU_OUT = "tar --format=pax --sparse{w} -C {{src}} -cf {{dst}}/out.tar ."

TOOLS = {
    "out": {
        "stager tar": STAGER.format(py=PY, mode="tar", opts=""),
        "stager tar -c": STAGER.format(py=PY, mode="tar", opts=" --verify checksum"),
        "GNU tar": GNU_OUT.format(w=""),
        "GNU tar -W": GNU_OUT.format(w=" -W"),
        "tarfile": f'{PY} -c "{_WRITE}" {{src}} {{dst}}/out.tar',
    },
    "in": {
        "stager untar": STAGER.format(py=PY, mode="untar", opts=""),
        "stager untar -c": STAGER.format(
            py=PY, mode="untar", opts=" --verify checksum"
        ),
        "GNU tar": "tar -C {dst} -xf {src}/in.tar",
        "GNU tar -d": "tar -C {dst} -xf {src}/in.tar && tar -C {dst} -df {src}/in.tar",
        "tarfile": f'{PY} -c "{_EXTRACT}" {{src}}/in.tar {{dst}}',
    },
}
# peer -> the stager's command it is compared with (the same checks or fewer)
PAIRS = {
    "out": {
        "GNU tar": "stager tar",
        "tarfile": "stager tar",
        "GNU tar -W": "stager tar -c",
        "baseline tar": "stager tar",
        "baseline tar -c": "stager tar -c",
    },
    "in": {
        "GNU tar": "stager untar",
        "tarfile": "stager untar",
        "GNU tar -d": "stager untar -c",
        "baseline untar": "stager untar",
        "baseline untar -c": "stager untar -c",
    },
}


def baseline(direction, path):
    """The stager's commands of DIRECTION run from PATH (another tree's
    src/python), named "baseline ..."."""
    return {
        "baseline " + tool[len("stager ") :]: cmd.replace("{pypath}", path)
        for tool, cmd in TOOLS[direction].items()
        if tool.startswith("stager ")
    }


def archive_dir(data, key, path, sh):
    """The directory holding in.tar, dataset KEY (at PATH) as GNU tar
    archives it by default; made once."""
    where = os.path.join(data, "tar-" + key)
    marker = where + ".complete"
    if not os.path.exists(marker):
        sh(f"rm -rf {where} && mkdir -p {where} && tar -C {path} -cf {where}/in.tar .")
        open(marker, "w").close()
    return where


def stager_archive(data, key, path, sh, pypath):
    """The stager's own archive of dataset KEY (pax), made once."""
    where = os.path.join(data, "tar-" + key + "-stager")
    marker = where + ".complete"
    if not os.path.exists(marker):
        sh(
            f"rm -rf {where} && mkdir -p {where} && "
            + STAGER.format(py=PY, mode="tar", opts=" --name out.tar").format(
                pypath=pypath, src=path, dst=where
            )
        )
        open(marker, "w").close()
    return os.path.join(where, "out.tar")


def _parse_stager(path):
    from flux_rsa.stage import tarformat

    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as buf:
            n = 0
            for m in tarformat.members(buf):
                n += m.path is not None
    finally:
        os.close(fd)
    return n


def _parse_tarfile(path):
    n = 0
    with tarfile.open(path, encoding="utf-8", errors="surrogateescape") as t:
        for m in t:
            n += m.name is not None
    return n


PARSERS = {"stager parser": _parse_stager, "tarfile parser": _parse_tarfile}


def parse_times(path, runs, sh):
    """{parser: [seconds]} reading the member list of the archive at PATH,
    in page cache, RUNS interleaved rounds; and the number of members."""
    sh(f"cat {path} > /dev/null")
    times = {p: [] for p in PARSERS}
    counts = {}
    for _ in range(runs):
        for name, parse in PARSERS.items():
            t0 = time.perf_counter()
            counts[name] = parse(path)
            times[name].append(time.perf_counter() - t0)
    return times, counts


def report(rows):
    """Print the tar rows: median times, and each peer's ratio to the
    stager command it is paired with (above 1: the stager is faster)."""
    print(
        "\ntar rows (median seconds elapsed, and CPU seconds of the command and "
        "all it started; ratio = peer / stager, above 1 the stager wins)"
    )
    for row in rows:
        t = row["times"]
        cpu = row.get("cpu", {})
        name = f"{row['dataset']} {row['direction']}"
        cells = ", ".join(
            f"{k} {v:.2f}" + (f" (CPU {cpu[k]:.2f})" if k in cpu else "")
            for k, v in t.items()
        )
        print(f"  {name:10} {cells}")
        pairs = PAIRS.get(row["direction"], {})
        for peer, own in pairs.items():
            if peer in t and own in t:
                line = f"    {peer} / {own}: {t[peer] / t[own]:.2f}"
                if peer in cpu and own in cpu and cpu[own]:
                    line += f" elapsed, {cpu[peer] / cpu[own]:.2f} CPU"
                print(line)
        if row["direction"] == "parse":
            own, lib = t.get("stager parser"), t.get("tarfile parser")
            if own and lib:
                print(
                    f"    {row['members']} members: tarfile parser / stager parser: "
                    f"{lib / own:.2f}"
                )


def median(ts):
    return round(statistics.median(ts), 3)
