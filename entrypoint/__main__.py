"""`python -m entrypoint` is the same as the `vla-entrypoint` console script."""

from entrypoint.cli import main

raise SystemExit(main())
