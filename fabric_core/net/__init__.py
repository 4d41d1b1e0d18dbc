"""The network as built: topologies, routes and the fabric profiles' figures.

Static descriptions and pure functions of them; nothing here advances time. May import
the top-level vocabulary (``commands``, ``units``, ``sourced``) and nothing else of the
core (``tests/test_layout_graph.py``).

* ``profiles``: the fabric profiles (native-400g, roce-400g, ...), every figure sourced.
* ``endpoint_costs``: what a message costs at the NICs and hosts (PCIe, NIC pipeline).
* ``topology``: ``Topology`` and the generators (``leaf_spine``, ``fat_tree``);
  ``tables``: the node and link tables and ``LinkStatus``; ``topofile`` and
  ``link_classes``: topologies read from a file.
* ``routing``: ECMP, adaptive routing and spraying on generated topologies;
  ``table_route`` and ``updown``: up*/down* routing on file topologies;
  ``route_rules``: what both routers share.
* ``paths``: virtual lanes and a path's fixed latency.
* ``scaleup``: the NVLink scale-up domain's figures.
"""
