"""One tick of the fluid model: rates, credits, PFC/ECN/DCQCN, byte moves, completions.

May import ``net`` and the top-level vocabulary. The fabric runs the tick through one
interface with two implementations: the compiled kernels (``kernels``, numba) and the
numpy reference (``step`` and ``reference``), which the tests hold each other to.

* ``flows``: the flow table (every message in flight, flat hop-major arrays), the
  requests that start flows and the completions they end in.
* ``step``: the reference solver (water-filling with credits) and the entry index;
  ``reference``: the rest of the reference tick.
* ``kernels``: the compiled tick (``kernels.tick.CompiledTick``).
* ``pfc`` and ``roce``: PFC queues, ECN marking, DCQCN (RoCE); ``ibcc``: InfiniBand
  congestion control on the credit fabric.
* ``links``: ``LinkBook``, the links' state from tick to tick (buffers, rates, counters).
* ``histogram``: the log-bucketed latency histograms.
* ``scaleup``: messages in flight over the NVLink domain.
* ``host``: ``FlowControlHost``, what ``roce`` and ``ibcc`` read and write of the fabric.
"""
