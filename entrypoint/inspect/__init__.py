"""Pure inspections of a job (topology, batch, assets, storage, resume, environment, patch, openpi's contract): read the host, return findings. Imports only core."""
