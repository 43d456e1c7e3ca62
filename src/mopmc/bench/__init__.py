"""Benchmarks of mopmc against Storm (the paper's Table 5), measured in fresh processes."""
