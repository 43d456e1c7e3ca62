"""Model input and output: PRISM, JANI and UMB files."""
