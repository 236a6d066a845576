"""Where a job finds what is on its RAM disk: ``rsa.paths`` (pure).

``bind``: at data_in's and data_out's own paths, in a mount namespace of
the job alone (made by the job shell plugin, src/shell/rsa.c), with the
``RSA_*`` variables as well.  ``env``: only the ``RSA_*`` variables say
where; the paths themselves show persistent storage.

The job's ``rsa.paths`` wins; without it the site's ``[rsa] paths``:
``bind``, ``env``, or ``auto`` (the default): ``bind`` where job shells
may make the namespace (the service looks once, on its node, when it
loads), else ``env``.  A default of ``bind`` turns into ``env`` for paths
that bind mounts cannot show (``bind_blocker``); asked for explicitly,
such a request is refused at submit.
"""

#: what a job may ask for
MODES = ("bind", "env")
#: what a site may set
SITE_MODES = ("auto",) + MODES


def bind_blocker(data_in, data_out):
    """Why bind mounts cannot show these directories at their own paths,
    or None when they can."""
    for key, path in (("data_in", data_in), ("data_out", data_out)):
        if path == "/":
            return f"rsa.{key} is / (a mount there would hide every other path)"
    if data_in and data_out and data_in.startswith(data_out.rstrip("/") + "/"):
        return (
            "rsa.data_in is inside rsa.data_out (the output area shown at data_out "
            "would hide it)"
        )
    return None


def resolve(requested, site, userns, data_in, data_out):
    """The mode a job gets: ``requested`` (its rsa.paths, or None), else the
    site's (``auto`` follows ``userns``: may job shells make a user
    namespace?).  None when the job has neither data_in nor data_out."""
    if data_in is None and data_out is None:
        return None
    if requested is not None:
        return requested
    mode = site if site != "auto" else ("bind" if userns else "env")
    if mode == "bind" and bind_blocker(data_in, data_out):
        return "env"
    return mode


def seen(rec):
    """What the job saw at its own paths when it started (``rec``: a record
    as a dict, as `flux rsa status` gets it): "in=ramdisk,out=ramdisk"
    (rsa.paths=bind: the RAM disk is shown there; "in=real" when the inputs
    were not staged in time: the real directory), "env" (only RSA_* point
    at the RAM disk), "real" (no RAM disk for it to use); "-" before it
    starts or when it asked for no paths.  The switch (INUSE_OUT) shows
    data_in's real directory again."""
    env = rec.get("env")
    req = rec.get("request") or {}
    if not env or not (req.get("data_in") or req.get("data_out")):
        return "-"
    if not (env.get("staged_in") or env.get("out_on_ramdisk")):
        return "real"
    if env.get("paths") != "bind":
        return "env"
    shown = []
    if req.get("data_in"):
        shown.append("in=" + ("ramdisk" if env.get("staged_in") else "real"))
    if req.get("data_out"):
        shown.append("out=" + ("ramdisk" if env.get("out_on_ramdisk") else "real"))
    return ",".join(shown)
