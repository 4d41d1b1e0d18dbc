"""Storage passthrough: NVMe targets, client CPUs and the access paths between them
(``model``: NVMe over RDMA, XDS, NFS over RDMA, NFS over TCP).

May import ``faults``, ``tick``, ``net`` and the top-level vocabulary. The storage
workloads that drive it are in ``workloads``.
"""
