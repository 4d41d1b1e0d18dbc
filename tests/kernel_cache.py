"""A kernel cache that holds the manifest's kernels but a few, for the tests of a first
run's compiling.

Those tests start a process on an empty cache of its own (``NUMBA_CACHE_DIR``). Empty, it
compiles every kernel, some two minutes of both cores: what a user's first run after an
install does, but the tests check how it is shared out (who compiles what, who waits for
what), not the minutes. ``cache_lacking`` fills such a cache from this checkout's own
(which the test run's start filled: ``tests/conftest.py``) with the manifest's kernels
(``kernels.warmup.MANIFEST``) but the ones named, where numba looks for them: the process
compiles those, and any kernel it calls that the manifest lacks, as a first run would.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from numba.core.caching import UserProvidedCacheLocator

from fabric_core.tick.kernels.warmup import Entry, load_manifest

#: The kernels' sources, and numba's cache of them in this checkout
KERNELS = Path(__file__).resolve().parents[1] / "fabric_core" / "tick" / "kernels"
IN_TREE = KERNELS / "__pycache__"


def cache_name(entry: Entry) -> str:
    """The name numba's cache files give ``entry``'s kernel: ``module.function``."""
    return f"{entry.module.rsplit('.', 1)[-1]}.{entry.dispatcher().py_func.__qualname__}"


def manifest() -> list[Entry]:
    """The manifest's kernels, both sections."""
    return load_manifest() + load_manifest(section="parallel")


def cache_lacking(cache_dir: Path, lacking: Iterable[Entry]) -> list[str]:
    """Fill ``cache_dir`` (a ``NUMBA_CACHE_DIR``) with this checkout's compiled kernels of
    the manifest but ``lacking``; their names (``cache_name``). numba keeps a user-given
    cache directory's files as it keeps ``__pycache__``'s, in a subdirectory named after
    the sources' (``UserProvidedCacheLocator``), each index checked against its source.

    Raises:
        ValueError: a kernel to copy that this checkout's cache does not hold.
    """
    left_out = {cache_name(e) for e in lacking}
    wanted = {cache_name(e) for e in manifest()} - left_out
    target = cache_dir / UserProvidedCacheLocator.get_suitable_cache_subpath(
        str(KERNELS / "tick.py")
    )
    target.mkdir(parents=True, exist_ok=True)
    copied = set()
    # the indexes first: numba writes a kernel's data before the index that names it, so a
    # worker compiling meanwhile cannot leave a copied index naming data not copied
    for suffix in (".nbi", ".nbc"):
        for f in IN_TREE.glob(f"*{suffix}"):
            kernel = f.name.split("-")[0]  # module.function-line.pyXY.nbi (or .N.nbc)
            if kernel in wanted:
                shutil.copy2(f, target / f.name)
                copied.add(kernel)
    if copied != wanted:
        raise ValueError(f"no kernel {sorted(wanted - copied)} in {IN_TREE}")
    return sorted(copied)
