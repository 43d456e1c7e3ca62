"""``python -m mopmc`` runs the CLI."""

from mopmc.cli.main import entry

entry()
