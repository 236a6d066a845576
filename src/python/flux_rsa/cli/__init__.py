"""Pieces of the `flux rsa` command."""
