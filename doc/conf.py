# Sphinx configuration: flux-rsa's man pages (make builds them with
# `python3 -m sphinx -b man doc BUILDDIR` when configure found Sphinx).

project = "flux-rsa"
copyright = "the flux-rsa developers"
author = "the flux-rsa developers"

root_doc = "index"
exclude_patterns = ["_build", "*.md"]
# one flat directory of pages: make moves them into man1/, man5/, man7/
man_make_section_directory = False
man_show_urls = False

#: (source without .rst, page name, one-line description, authors, section)
man_pages = [
    (
        "man1/flux-rsa",
        "flux-rsa",
        "the RAMDISK Storage Accelerator: RSA state of jobs, live view, timeline, pool",
        [author],
        1,
    ),
    (
        "man5/flux-config-rsa",
        "flux-config-rsa",
        "configuration of the RAMDISK Storage Accelerator ([rsa] table)",
        [author],
        5,
    ),
    (
        "man7/flux-rsa-attributes",
        "flux-rsa-attributes",
        "job attributes that ask for a RAM disk on the RSA nodes (rsa.*)",
        [author],
        7,
    ),
]


def _man_role(section):
    """:man1:`flux-jobs` -> flux-jobs(1), in bold, as man pages name pages."""
    from docutils import nodes

    def role(name, rawtext, text, lineno, inliner, options=None, content=None):
        return [nodes.strong(rawtext, f"{text}({section})")], []

    return role


def setup(app):
    for section in (1, 5, 7):
        app.add_role(f"man{section}", _man_role(section))
