"""The compiled tick: numba kernels over the flow table's flat arrays.

``tick.CompiledTick`` is the face the fabric uses; ``index``, ``solve`` and ``move``
hold the kernels, each a plain loop that says what happens to every entry. The
numpy reference they are tested against is ``fabric_core.tick.step``.
"""
