"""The repository's scripts. The Python ones run as modules from the repository root (`python3 -m scripts.bench_fetch`,
`scripts/bench` runs `python3 -m scripts.benchlib`), so they import `entrypoint` and `tests.support` as packages."""
