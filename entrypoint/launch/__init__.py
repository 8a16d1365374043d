"""The only package that acts on the job: run, supervise torchrun, watch for stalls, preflight, write the record."""
