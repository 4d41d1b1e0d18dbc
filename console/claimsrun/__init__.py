"""``fabtop claims``: the article's claims C1–C10, measured by the emulator, with verdicts.

``catalogue`` holds the claims (a plain sentence, the article's figure, the verdict
rule); the ``measure_*`` modules run the bundled scenarios that bear on each;
``runner`` judges them; ``render`` and ``plots`` write the table, ``docs/CLAIMS.md``
and the sweep plots. Nothing here holds an emulated figure: each comes from a run.
"""

from __future__ import annotations

from console.claimsrun.catalogue import CLAIMS, Claim, Part, select
from console.claimsrun.model import Settings
from console.claimsrun.runner import Report, Row, run_claims
from console.claimsrun.verdict import Band, Condition, Rule, Verdict

__all__ = [
    "CLAIMS",
    "Band",
    "Claim",
    "Condition",
    "Part",
    "Report",
    "Row",
    "Rule",
    "Settings",
    "Verdict",
    "run_claims",
    "select",
]
