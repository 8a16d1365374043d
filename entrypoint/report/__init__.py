"""Seeing a run: TensorBoard event files while it trains, and one report of the whole job when it ends.

- `steps`    a training progress line as numbers (shared by the event files and the report)
- `gpus`     NVML samples of this node's GPUs
- `metrics`  the event-file writer: a background thread fed the training output, GPU samples and job events
- `logscan`  bounded reads of a node log: whole when small, from the end and in spaced windows when large
- `collect`  every node's files of an experiment (records, logs, attempts, stall reports) read into one model
- `summary`  the report's first line: the cause, in at most 1,024 characters
- `charts`   inline SVG: the per-node timeline and the loss and step-time charts
- `html`     the self-contained page (inline CSS and SVG; no script, no network)
- `command`  `vla-entrypoint report` and the automatic report at the end of `run`, written atomically

Imports only `core/` and `inspect/`: `launch/` feeds it, never the other way round.
"""
