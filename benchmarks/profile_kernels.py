"""Where a running fabric's time goes, compiled kernels by name and, on request, by line.

    python benchmarks/profile_kernels.py [SCENARIO] [--profile P] [--seconds S]
                                         [--warmup N] [--top N] [--one-by-one]
                                         [--lines NAME] [--line-top N]

Samples the process with Linux ``perf`` (Debian's ``linux-perf``; a developer's tool, so
nothing installs it for you) while it runs ``SCENARIO`` (a bundled name or a TOML path;
the default scenario if none) as ``Fabric.run_ticks`` runs it, busy and uneventful ticks at
once included. perf cannot name numba's machine code on its own: it lives in memory that
no file maps. So before sampling, this writes perf's map of such code
(``/tmp/perf-PID.map``): the address of every function numba compiled or loaded, from its
code library. Samples then fall into kernels by name (``index.entry_index#92``: the module
under ``fabric_core.tick.kernels``, the function and numba's number for that compiled
version, since one kernel compiled for two argument types is two pieces of code), into
numba's runtime (``NRT_incref``: reference counts of arrays; ``malloc``: arrays made in a
kernel) and into the interpreter.

``--lines NAME`` also splits the samples of the kernels whose name contains ``NAME`` by
source line. That needs the kernels compiled with line tables (``NUMBA_DEBUGINFO=1``),
which are kept in a cache of their own (``$TMPDIR/fabtop-profile-cache``, so the run's own
cache is not touched): the first such run compiles every kernel again, some minutes.
numba drops a kernel's object code once it is loaded, so this keeps a copy as numba loads
it (a private numba hook, ``CPUCodeLibrary._set_compiled_object``).

Nothing here changes what the fabric computes; the shares are the point, not the
milliseconds (perf's sampling adds a few per cent). Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: perf's sampling rate (per second): some 20,000 samples in ten seconds
FREQUENCY = 2000
#: where ``--lines`` keeps the kernels compiled with line tables
DEBUG_CACHE = Path(tempfile.gettempdir()) / "fabtop-profile-cache"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="default", help="bundled name or TOML path")
    p.add_argument("--profile", help="fabric profile (the scenario's own if not given)")
    p.add_argument("--seconds", type=float, default=10.0, help="seconds sampled (10)")
    p.add_argument("--warmup", type=int, default=3000, help="ticks run before sampling (3000)")
    p.add_argument("--top", type=int, default=25, help="functions listed (25)")
    p.add_argument(
        "--one-by-one", action="store_true", help="ticks one by one (busy ticks not at once)"
    )
    p.add_argument("--lines", metavar="NAME", help="split these kernels' samples by line")
    p.add_argument("--line-top", type=int, default=30, help="lines listed (30)")
    return p.parse_args(argv)


def demangle(symbol: str) -> str:
    """A numba function's readable name: ``_ZN11fabric_core4tick7kernels5index11entry_
    indexB3v92...`` is ``index.entry_index#92``; other symbols are left as they are."""
    prefix = ""
    for wrapper in ("cfunc.", "_ZN7cpython"):
        if symbol.startswith(wrapper):
            prefix = "(wrapper) "
            symbol = "_ZN" + symbol[len(wrapper) :] if wrapper == "_ZN7cpython" else symbol[6:]
    if not symbol.startswith("_ZN"):
        return prefix + symbol
    parts: list[str] = []
    i = 3
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while symbol[j].isdigit():
            j += 1
        n = int(symbol[i:j])
        parts.append(symbol[j : j + n])
        i = j + n
    version = ""
    if symbol[i : i + 1] == "B":  # numba's ABI tag: B<len>v<number>
        j = i + 1
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        tag = symbol[j : j + int(symbol[i + 1 : j] or 0)]
        version = "#" + tag[1:] if tag.startswith("v") else ""
    for known in (["fabric_core", "tick", "kernels"], ["fabric_core"]):
        if parts[: len(known)] == known:
            parts = parts[len(known) :]
            break
    return prefix + ".".join(parts) + version


def keep_object_code() -> dict[int, bytes]:
    """Copies of the object code numba loads into its engine, by code library (numba
    frees its own once loaded)."""
    from numba.core import codegen

    kept: dict[int, bytes] = {}
    original: Any = codegen.CPUCodeLibrary._set_compiled_object

    def keep(self: Any, value: bytes) -> None:
        kept[id(self)] = value
        original(self, value)

    codegen.CPUCodeLibrary._set_compiled_object = keep  # type: ignore[method-assign]
    return kept


def compiled_functions(kept: dict[int, bytes]) -> dict[int, tuple[str, bytes | None]]:
    """Every function numba has compiled or loaded in this process: its address, its
    symbol and the object code it came from (if kept)."""
    import gc

    from numba.core.dispatcher import Dispatcher

    found: dict[int, tuple[str, bytes | None]] = {}
    seen: set[int] = set()
    for d in gc.get_objects():
        try:
            if not isinstance(d, Dispatcher):
                continue
        except ReferenceError:  # a weak proxy whose object is gone
            continue
        overloads: Any = d.overloads  # (numba's compile results, untyped)
        for cres in overloads.values():
            lib = cres.library
            if id(lib) in seen:
                continue
            seen.add(id(lib))
            for module in (lib._final_module, lib._shared_module):
                if module is None:
                    continue
                for fn in module.functions:
                    if fn.is_declaration:
                        continue
                    try:
                        address = lib.get_pointer_to_function(fn.name)
                    except Exception:  # a symbol of another library
                        continue
                    if address:
                        found[address] = (fn.name, kept.get(id(lib)))
    return found


def write_perf_map(functions: dict[int, tuple[str, bytes | None]]) -> Path:
    """perf's map of JIT code for this process: each function up to the next one."""
    starts = sorted(functions)
    path = Path(f"/tmp/perf-{os.getpid()}.map")
    with path.open("w") as out:
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else start + 4096
            out.write(f"{start:x} {min(end - start, 1 << 20):x} {functions[start][0]}\n")
    return path


def sample(fabric: Any, seconds: float, data: Path) -> float:
    """Run ticks for ``seconds`` under ``perf record``; ms a tick."""
    perf = subprocess.Popen(
        ["perf", "record", "-F", str(FREQUENCY), "-o", str(data), "-p", str(os.getpid())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # (perf attaches)
    t0, tick0 = time.perf_counter(), fabric.tick
    while time.perf_counter() - t0 < seconds:
        fabric.run_ticks(200)
    ms: float = (time.perf_counter() - t0) / (fabric.tick - tick0) * 1e3
    perf.send_signal(signal.SIGINT)
    perf.wait()
    return ms


def samples(data: Path) -> list[tuple[int, str]]:
    """(address, symbol) of every sample."""
    out = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        ip, _, sym = line.strip().partition(" ")
        if ip:
            rows.append((int(ip, 16), sym.strip() or "[unknown]"))
    return rows


def by_line(name: str, start: int, obj: bytes, rows: list[tuple[int, str]]) -> Counter[str] | None:
    """The samples of one function by source line (its object code's line table)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.o"
        path.write_bytes(obj)
        table = subprocess.run(
            ["objdump", "-t", str(path)], capture_output=True, text=True, check=True
        ).stdout
        where = None
        for line in table.splitlines():
            fields = line.split()
            if fields and fields[-1] == name:
                # value, flags..., section, size, name
                where = (int(fields[0], 16), fields[-3], int(fields[-2], 16))
        if where is None:
            return None
        offset, section, size = where
        hits = Counter(ip - start + offset for ip, _ in rows if start <= ip < start + size)
        if not hits:
            return Counter()
        places = sorted(hits)
        lines = subprocess.run(
            ["addr2line", "-e", str(path), "-j", section, *(hex(p) for p in places)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    out: Counter[str] = Counter()
    for place, line in zip(places, lines, strict=False):
        out[line.rsplit("/", 1)[-1]] += hits[place]
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("perf", "objdump", "addr2line"):
        if shutil.which(tool) is None:
            sys.exit(
                f"profile_kernels: `{tool}` is not installed (Debian: apt-get install linux-perf binutils)"
            )
    if args.lines:
        os.environ["NUMBA_DEBUGINFO"] = "1"
        os.environ.setdefault("NUMBA_CACHE_DIR", str(DEBUG_CACHE))
    kept = keep_object_code() if args.lines else {}  # (copies only for the line tables)

    from fabric_core.runtime import busy
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.runtime.scenario import ScenarioError, load_scenario
    from fabric_core.tick.kernels.warmup import compile_entries, load_manifest

    try:
        scenario = load_scenario(args.scenario, profile=args.profile)
    except ScenarioError as e:
        sys.exit(f"profile_kernels: {e}")
    busy.ENABLED = not args.one_by_one
    print("compiling or loading the kernels ...", file=sys.stderr, flush=True)
    compile_entries(load_manifest())  # (the deferred ones too: else the first ticks lack them)
    fabric = Fabric.from_scenario(scenario, "compiled")
    fabric.run_ticks(args.warmup)
    functions = compiled_functions(kept)
    perf_map = write_perf_map(functions)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        ms = sample(fabric, args.seconds, data)
        rows = samples(data)
    perf_map.unlink(missing_ok=True)
    total = len(rows)
    print(f"{args.scenario}: {ms:.3f} ms a tick while sampled, {total} samples")
    shares = Counter(demangle(sym) for _, sym in rows)
    for name, n in shares.most_common(args.top):
        print(f"{100 * n / total:6.2f} %  {name}")
    if args.lines:
        for start, (name, obj) in sorted(functions.items()):
            label = demangle(name)
            if args.lines not in label or label.startswith("(wrapper)") or obj is None:
                continue
            lines = by_line(name, start, obj, rows)
            if not lines:
                continue
            n = sum(lines.values())
            print(f"\n{label}: {100 * n / total:.2f} % of all samples, by line")
            for line, k in lines.most_common(args.line_top):
                print(f"{100 * k / n:6.2f} %  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
