"""A copy made while the source is walked: the parent's side.

Where the C loop is built (an unsharded copy), the workers start copying
before the walk is over.  Each step of the walk scans the next
directories; each one is made under DST (or, there already, compared with
the plan: a resumed run) and its files become tasks (tasks.py), small ones
packed for the C loop.  The tasks of two directories alternate, so that
two workers mostly create files in different directories.
"""

import os

from . import bigfile, fsutil, native
from . import plan as planmod
from . import tasks as tk
from .errors import from_oserror


class Stream:
    """Tasks for the workers of COPIER (a copy.Copier, through its public
    methods) from WALKER (a plan.Walker making the copier's plan, not
    walked yet).  After the run, PACKED lists the native.Packed the C loop
    copied and UNPACKED the other files, for verification."""

    def __init__(self, copier, walker):
        self.copier = copier
        self.walker = walker
        copier.open()
        self.stale = 0  # plan.stale entries removed so far
        self.packed = []
        self.unpacked = []

    def produce(self):
        """The tasks of the next two directories; None when all are sent."""
        lanes = []
        for _ in range(2):
            di = self.walker.step()
            if di is None:
                break
            lanes.append(self._directory(di, self.walker.span()[0]))
        if not lanes:
            self.copier.tally.walked = True
            return None
        return tk.alternate(lanes)

    def _directory(self, di, files):
        """Make directory DI, just scanned, under DST; the tasks of its FILES."""
        c = self.copier
        try:
            made = di != 0 and c.make_dir(di)
            ddir = c.dst_dir(di)
            try:
                if not made:
                    self._compare(di, ddir, files)
                return self._tasks(di, len(c.plan.files) - len(files), files, ddir)
            finally:
                os.close(ddir)
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(c.dst, c.plan.dirs[di].rel)) from None

    def _compare(self, di, ddir, files):
        """Directory DI was there already (open as DDIR): its complete FILES
        are skipped and stale temporary files removed, but the hidden
        directories of a killed run the copy takes up."""
        c = self.copier
        plan = c.plan
        planmod.compare_dir(plan, di, ddir, files, c.tag)
        if len(plan.stale) > self.stale:
            keep = self._hidden_kids(di) if c.hide else ()
            for _, name in plan.stale[self.stale :]:
                if name not in keep:
                    fsutil.remove_stale(name, ddir)
        self.stale = len(plan.stale)

    def _hidden_kids(self, di):
        """The hidden names of the directories in directory DI, just scanned
        (the last ones the walk found): a killed run's, to be taken up."""
        c = self.copier
        dirs = c.plan.dirs
        kids = set()
        for k in range(len(dirs) - 1, di, -1):
            if dirs[k].d != di:
                break
            kids.add(c.hidden_name(k))
        return kids

    def _tasks(self, di, first, files, ddir):
        """The tasks of FILES of directory DI (open as DDIR), the first of
        them being file FIRST of the plan."""
        c = self.copier
        where = c.where(di)
        owner = c.new_owner(di, ddir)
        c.tally.planned(files)
        most_files, most_bytes = tk.BATCH_FILES, tk.BATCH_BYTES
        tasks = []
        batch = []
        nbytes = 0

        def pack():
            packed = native.Packed(di, batch, c.chown, owner)
            self.packed.append(packed)
            return tk.Packed(where, packed, c.creating())

        for i, f in enumerate(files, first):
            if f.skip:
                pass  # complete already; verified with the unpacked files
            elif f.size >= bigfile.BIG:
                name, pieces = c.add_big(i, f, ddir)
                tasks += [
                    tk.StreamedRange(where, i, f, name, off, n) for off, n in pieces
                ]
            elif native.eligible(f):
                batch.append(f)
                nbytes += f.size
                if len(batch) >= most_files or nbytes >= most_bytes:
                    tasks.append(pack())
                    batch, nbytes = [], 0
                continue
            else:
                tasks.append(tk.One(where, f, c.creating()))
            self.unpacked.append(f)  # not in a Packed
        if batch:
            tasks.append(pack())
        return tasks
