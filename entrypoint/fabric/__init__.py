"""RDMA and NCCL: the machine's inventory, the NCCL decisions, and proof of the transport from NCCL's own logs."""
