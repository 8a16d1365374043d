"""RDMA and NCCL: the machine's inventory, the NCCL decisions, and proof of the transport from NCCL's own logs.

- `inventory`  what the machine has: RDMA ports, interfaces, routes, GPUDirect RDMA, memlock, NCCL presets
- `decide`     `plan_fabric` -> `FabricPlan`: transport, exports, kept presets, decisions, findings
- `sockets`    rule 7: the bootstrap interface and the socket interface variables
- `rdma`       rules 1, 3-6, 8, 9: RDMA ports, GID index, RDMA health
- `draft`      the `Draft` those rules write decisions and findings into; NCCL's list syntax
- `memlock`    `raise_memlock`, the package's one side effect, for launch to call
- `nccl_debug` NCCL's debug routing into this node's files (what the plan needs)
- `nccl_log`   what NCCL's logs prove about the transport actually used
- `messages`   every sentence the package shows
"""
