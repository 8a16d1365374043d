"""The static file server used by the TACO tests and benchmark; it now lives in `tests/httpserver.py`."""

from tests.httpserver import serve_directory

__all__ = ["serve_directory"]
