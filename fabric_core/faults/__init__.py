"""Faults and what the fabric does about them.

May import ``tick``, ``net`` and the top-level vocabulary.

* ``book``: the fault catalogue, ``FaultBook`` (the faults of a run and the state they
  impose) and ``FaultView`` (one fault's timeline as a snapshot shows it).
* ``recovery``: detection, reroute / reconvergence and measured recovery.
* ``admission``: how many flows a fault, or the whole fabric, may have in flight.
* ``ibgda``: the IBGDA ``version_mismatch`` fault.
"""
