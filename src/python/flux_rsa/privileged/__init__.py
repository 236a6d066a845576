"""flux-rsa's one privileged entry point and the pool's way to use it.

In a multi-user system instance the broker and the pool run as the
unprivileged ``flux`` user, and everything that needs root goes through
flux-security's IMP: ``flux-imp run rsa`` starts the installed
``rsa-imp-run`` as root with nothing but the ``RSA_*`` variables of one
request.  ``variables`` checks a request (pure; the kinds of value its
variables hold are ``values``), ``trust`` what root may touch, ``ops``
carries it out, ``main`` holds the entry points and ``caller`` is the
pool's side (see doc/guide/install.md).
"""
