"""GPU endpoints: what happens at a GPU before its bytes reach the wire and after.

May import ``storage``, ``faults``, ``tick``, ``net`` and the top-level vocabulary.

* ``model``: ``EndpointModel``: posting (IBGDA or a CPU proxy) and the data path (GDR or
  a bounce buffer), as FIFO servers.
* ``params``: ``EndpointParams``, each figure with its source, and the cost formulas.
"""
