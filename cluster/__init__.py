"""Adapters that run parts of a fabric on a distributed engine, outside the core.

``ray_planes``: one engine per plane of a multi-plane fabric, each a Ray actor
(``RayPool``, a ``fabric_core.planes.pool.PlanePool``). Needs the ``cluster`` extra
(``pip install -e '.[cluster]'``); the core never imports Ray.
"""
