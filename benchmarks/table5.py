"""Table 5 of the paper: mopmc beside Storm on Models A, B and C (same options as ``mopmc bench``).

Every measurement is a fresh process, best of 2, 300 s timeout, peak memory from outside; records
go to ``benchmarks/results/table5/cells/`` one file per cell, so an interrupted run resumes.

    python benchmarks/table5.py --quick
    nice python benchmarks/table5.py                      # everything (takes long)
    python benchmarks/table5.py --families A --sizes A:20-120 --queries storm,achievability
    python benchmarks/table5.py --report-only             # rebuild CSV, markdown and plots
"""

from __future__ import annotations

import sys

from mopmc.cli.main import entry

if __name__ == "__main__":
    sys.argv = ["mopmc", "bench", *sys.argv[1:]]
    entry()
