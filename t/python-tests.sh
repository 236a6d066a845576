#!/bin/sh
# Run the pytest suite (core, stager, pool) with the Python Flux uses.
# Flux-dependent tests skip themselves when Flux is missing; conftest.py
# prints one line per reason with how many were skipped.
cd "${RSA_SRCDIR:-$(dirname "$0")/..}" || exit 1
PYTHONPATH="$PWD/src/python${PYTHONPATH:+:$PYTHONPATH}" \
    exec "${PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider t/python
