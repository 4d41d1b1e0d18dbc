"""The running emulator: the fabric, its engine, its scenarios and its snapshots.

May import every package below it (``workloads``, ``endpoints``, ``storage``,
``faults``, ``tick``, ``net``); only ``reports`` imports it.

* ``fabric``: ``Fabric``, which owns the state and runs the tick in order.
* ``engine``: ``Engine``, which paces a fabric in real time and applies commands.
* ``bus``: ``SnapshotBus``, where the engine publishes snapshots.
* ``snapshot``: the immutable views every interface reads; ``events``: the event log.
* ``scenario``: scenario files, parsed and checked.
"""
