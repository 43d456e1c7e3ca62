"""A faster highway simulator with highway-env's own dynamics (see :mod:`.road`)."""
