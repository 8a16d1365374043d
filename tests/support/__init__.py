"""Fixtures shared by the tests and the scripts: synthetic openpi-assets trees and releases (`synthetic`), fake
machines (`fakehosts`), a static HTTP server with faults on demand (`httpserver`), stand-in TACO wheels
(`taco_wheel`, whose prelude is `taco_prelude.py`).

Imported as `tests.support.<module>`: pytest puts the repository root on `sys.path` (`tests/` is a package), and the
scripts run as modules from the repository root (`python3 -m scripts.bench_fetch`, `scripts/bench`). Nothing here
imports at package level, so `python3 -m tests.support.taco_wheel` runs where only `packaging` is installed.
"""
