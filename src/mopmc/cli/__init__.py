"""The ``mopmc`` command line (Typer): thin commands that parse, call the library, render."""
