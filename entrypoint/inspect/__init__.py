"""Pure inspections of a job: topology, batch, assets, storage, resume, environment, patch, openpi's contract.

Each reads the host and returns findings or a decision; its words live in `inspect/messages.py`. Imports only core.
"""
