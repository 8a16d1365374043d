"""scripts/bench: the benchmark modules (see scripts/bench)."""
