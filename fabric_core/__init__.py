"""fabtop's emulator core: a fluid model of an RDMA fabric, run tick by tick.

numpy, asyncio, the standard library and msgspec only: nothing here imports a UI,
MQTT or Prometheus (``tests/test_import_hygiene.py`` checks it). The entry points:

* ``fabric_core.scenario.load_scenario`` and ``fabric_core.fabric.Fabric.from_scenario``
  build a fabric; ``Fabric.step`` / ``run_ticks`` advance it; ``Fabric.snapshot`` shows it.
* ``fabric_core.engine.Engine`` runs it continuously and publishes snapshots on a bus.
* ``fabric_core.commands`` holds the typed commands every interface speaks.
"""
