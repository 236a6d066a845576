#!/bin/sh
# Generate ./configure.  Needs autoconf, automake, libtool and pkg-config.
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf --install --force
echo "Now run ./configure (see README.md)."
