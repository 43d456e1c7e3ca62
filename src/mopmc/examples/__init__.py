"""Small example models shipped with mopmc; their paths are in :mod:`mopmc.examples.files`."""

from mopmc.examples import files

__all__ = ["files"]
