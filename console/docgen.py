"""Regenerate the generated parts of ``docs/MODEL.md``.

    python -m console.docgen              # parameter tables only (fast)
    python -m console.docgen --measure    # also rerun the comparisons (a few minutes)

Generated parts sit between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
markers; everything else in the file is prose and is left alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from console.cli.compare import lower_by, lower_by_header, render
from fabric_core.net.profiles import NATIVE_800G_SOURCES, PROFILES, ROCE_SOURCES, Profile
from fabric_core.reports.compare import compare_scenario, latency_by_size

MODEL_MD = Path(__file__).resolve().parents[1] / "docs" / "MODEL.md"


def parameter_table() -> str:
    """Every profile parameter: value per profile, unit and source."""
    profiles = [PROFILES[n] for n in ("native-400g", "roce-400g", "native-800g") if n in PROFILES]
    head = "| parameter | " + " | ".join(p.name for p in profiles) + " | unit | source |"
    rows = [head, "|" + "---|" * (len(profiles) + 3)]
    for f in dataclasses.fields(Profile):
        src = f.metadata.get("source")
        if not src:
            continue
        values = [_fmt(getattr(p, f.name)) for p in profiles]
        source = src
        if f.name in ROCE_SOURCES:  # RoCE's own source, even where the value is the same
            source = f"{src}. RoCE: {ROCE_SOURCES[f.name]}"
        if f.name in NATIVE_800G_SOURCES:
            source = f"{source}. native-800g: {NATIVE_800G_SOURCES[f.name]}"
        rows.append(
            f"| `{f.name}` | "
            + " | ".join(values)
            + f" | {f.metadata.get('unit', '')} | {source} |"
        )
    return "\n".join(rows)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def replace_block(text: str, name: str, body: str) -> str:
    """Put ``body`` between the markers called ``name`` (added at the end if missing)."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description="regenerate docs/MODEL.md's generated tables")
    ap.add_argument("--measure", action="store_true", help="rerun the comparisons too")
    ap.add_argument("--duration", default="1ms", help="simulated time per comparison run")
    args = ap.parse_args()
    text = MODEL_MD.read_text()
    text = replace_block(text, "parameters", parameter_table())
    if args.measure:
        from fabric_core.units import parse_duration

        d = parse_duration(args.duration)
        for scenario in ("default", "pfc-deadlock"):
            result = compare_scenario(scenario, d if scenario == "default" else 6e-3)
            cmd = f"fabtop compare {scenario} --duration {args.duration if scenario == 'default' else '6ms'} --no-sizes"
            text = replace_block(
                text,
                f"compare-{scenario}",
                f"`{cmd}`:\n\n```\n{render(result, 'native-400g', 'roce-400g')}\n```",
            )
        rows = latency_by_size()
        lines = [
            f"| message | switches | native-400g | roce-400g | {lower_by_header('native-400g')} |",
            "|---:|---:|---:|---:|---:|",
        ]
        from fabric_core.units import format_bytes, format_duration

        for r in rows:
            lat = r["latency_seconds"]
            lines.append(
                f"| {format_bytes(r['size_bytes'])} | {r['switch_hops']} | {format_duration(lat['native-400g'])} | "
                f"{format_duration(lat['roce-400g'])} | {lower_by(r['reduction'])} |"
            )
        text = replace_block(text, "latency-by-size", "\n".join(lines))
    MODEL_MD.write_text(text)
    print(f"wrote {MODEL_MD}")


if __name__ == "__main__":
    main()
