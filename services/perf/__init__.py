"""`make bench-perf`: how each memory system's cost grows with its memory, side by side with a numpy
brute-force floor and the rig's own overheads, in one run (the measurement rules: services/perf/README.md)."""
