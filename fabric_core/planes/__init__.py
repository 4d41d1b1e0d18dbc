"""One engine per plane: a multi-plane fabric cut at its planes (issue 19).

A multi-plane fabric's planes share nothing but the endpoints: each NIC port is in one
plane, and a message is sprayed over the planes. That is where one process can be cut in
several: each plane runs as its own ``Fabric`` (``plane.PlaneEngine``), and a
coordinator (``coordinator.PlanedFabric``) runs the workloads, splits each message into
per-plane parts, hands each plane its parts for a batch of ticks and collects the
completions; a message completes when its last part does. The coordinator looks to the
engine, the console, the exporters and the recorder like a ``Fabric``.

Where the plane engines run is a ``pool.PlanePool``: ``pool.InProcessPool`` runs them
in this process, one after the other (the reference); an adapter outside the core runs
each as an actor of a distributed engine (``cluster.ray_planes``). Both give the same
results, bit for bit: the coordinator does the same work in the same order either way.
"""
