"""fabtop's emulator core: a fluid model of an RDMA fabric, run tick by tick.

numpy, numba, asyncio, the standard library and msgspec only: nothing here imports a UI,
MQTT or Prometheus (``tests/test_import_hygiene.py`` checks it). The packages, bottom to
top (each may import those below it; docs/ARCHITECTURE.md, ``tests/test_layout_graph.py``):
``net``, ``tick``, ``faults``, ``storage``, ``endpoints``, ``workloads``, ``runtime``,
``reports``. The top-level modules are the vocabulary all of them use: ``commands`` (the
typed commands every interface speaks), ``units`` and ``sourced``.

The entry points:

* ``runtime.scenario.load_scenario`` and ``runtime.fabric.Fabric.from_scenario`` build a
  fabric; ``Fabric.step`` / ``run_ticks`` advance it; ``Fabric.snapshot`` shows it.
* ``runtime.engine.Engine`` runs it continuously and publishes snapshots on a bus.
* ``reports.run.run_for`` runs it headless and ``reports.run.summarise`` reports on it.
"""
