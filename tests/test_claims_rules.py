"""The claims' verdict rules on their own: threshold cases, NaN, worst-of, --only parsing."""

from __future__ import annotations

import math

import pytest

from console.claimsrun import CLAIMS, Band, Condition, Rule, Verdict, select
from console.claimsrun.catalogue import BY_ID
from console.claimsrun.verdict import at_least, at_most

R, P, N = Verdict.REPRODUCED, Verdict.PARTLY, Verdict.NOT_REPRODUCED


def grade(claim: str, part: str, **metrics: float) -> Verdict:
    rule = next(p.rule for p in BY_ID[claim].parts if p.key == part)
    return rule.verdict(metrics)


def test_bands_are_closed_and_refuse_nan() -> None:
    b = Band(0.3, 0.6)
    assert 0.3 in b and 0.6 in b and 0.45 in b
    assert 0.2999 not in b and 0.6001 not in b and math.nan not in b
    assert math.inf not in Band(0.0)  # an unmeasurable infinity confirms nothing


@pytest.mark.parametrize(
    ("value", "verdict"), [(0.80, R), (0.7999, P), (0.40, P), (0.3999, N), (-1.0, N), (math.nan, N)]
)
def test_c4_latency_rule_thresholds(value: float, verdict: Verdict) -> None:
    assert grade("C4", "vs-tcp", latency_reduction=value) is verdict


@pytest.mark.parametrize(("value", "verdict"), [(1.25, R), (1.2501, P), (1.6, P), (1.61, N)])
def test_c4_close_to_local_is_lower_is_better(value: float, verdict: Verdict) -> None:
    assert grade("C4", "vs-local", remote_over_local=value) is verdict


@pytest.mark.parametrize(
    ("value", "verdict"),
    [(0.30, R), (0.60, R), (0.2999, P), (0.6001, P), (0.10, P), (0.0999, N)],
)
def test_c5_step_rule_is_a_band_around_the_articles_range(value: float, verdict: Verdict) -> None:
    # more than the article claims is not "reproduced" either: the figure differs
    assert grade("C5", "step", step_reduction=value) is verdict


@pytest.mark.parametrize(
    ("rdma", "tcp", "verdict"),
    [
        (1.0, 0.55, R),
        (0.96, 0.45, R),
        (1.0, 0.65, R),
        (1.0, 0.70, P),  # TCP short of RDMA, but not near 55 %
        (1.0, 0.30, P),
        (1.0, 0.96, N),  # TCP as busy as RDMA: the claim's gap is not there
        (0.90, 0.55, P),  # RDMA short of 95 %
        (1.0, math.nan, N),
    ],
)
def test_c5_utilisation_rule_grades_both_halves(rdma: float, tcp: float, verdict: Verdict) -> None:
    """ "More than 95 % busy on RDMA, where TCP leaves them near 55 %": both halves count."""
    assert grade("C5", "util", rdma_utilisation=rdma, tcp_utilisation=tcp) is verdict


@pytest.mark.parametrize(
    ("gap", "verdict"),
    [(0.53, R), (0.63, R), (0.73, R), (0.5299, P), (0.74, P), (0.20, P), (0.19, N)],
)
def test_c7_gap_rule(gap: float, verdict: Verdict) -> None:
    assert grade("C7", "3-switch", gap_3sw_ge_4k=gap) is verdict


@pytest.mark.parametrize(("lat", "verdict"), [(1e-6, R), (1.0001e-6, P), (2e-6, P), (2.1e-6, N)])
def test_c7_sub_microsecond_rule(lat: float, verdict: Verdict) -> None:
    assert grade("C7", "sub-microsecond", native_1sw_small_s=lat) is verdict


def test_c8_needs_every_condition_and_takes_the_worst() -> None:
    ok = {"native_dropped_bytes": 0.0, "native_deadlocks": 0.0, "roce_deadlocks": 1.0}
    assert grade("C8", "deadlock", **ok) is R
    assert grade("C8", "deadlock", **{**ok, "roce_deadlocks": 0.0}) is P
    assert grade("C8", "deadlock", **{**ok, "native_dropped_bytes": 1.0}) is N
    assert grade("C8", "deadlock", **{**ok, "native_deadlocks": 1.0}) is N


@pytest.mark.parametrize(("rises", "verdict"), [(1.0, R), (0.99, P), (0.5, P), (0.49, N)])
def test_c9_share_rule(rises: float, verdict: Verdict) -> None:
    assert grade("C9", "share", share_rise_fraction=rises) is verdict


@pytest.mark.parametrize(("ratio", "verdict"), [(10.0, R), (9.99, P), (2.0, P), (1.99, N)])
def test_c10_recovery_rule(ratio: float, verdict: Verdict) -> None:
    assert grade("C10", "recovery", recovery_ratio=ratio) is verdict


def test_a_missing_metric_is_not_reproduced() -> None:
    assert grade("C2", "dispatch") is N


def test_rule_reports_the_conditions_that_fail() -> None:
    rule = Rule((at_least("a", 1.0, 0.5), at_most("b", 1.0, 2.0)))
    assert rule.verdict({"a": 2.0, "b": 1.5}) is P
    assert [c.metric for c in rule.failing({"a": 2.0, "b": 1.5})] == ["b"]
    assert "a ≥ 1 → reproduced, ≥ 0.5 → partly" in rule.describe()
    assert Rule(()).verdict({}) is N
    # all or nothing: it read "≤ 0 → reproduced, ≤ 0 → partly", a partly that never is
    assert at_most("d", 0.0, 0.0, "drops").describe() == "drops ≤ 0 → reproduced, else not"


def test_every_claim_has_rows_rules_and_sentences() -> None:
    assert [c.id for c in CLAIMS] == [f"C{i}" for i in range(1, 11)]
    for c in CLAIMS:
        assert c.parts
        for p in c.parts:
            assert p.sentence and p.article and p.rule.conditions
            for cond in p.rule.conditions:
                assert isinstance(cond, Condition)
                # the partly band is the wider one: reproduced implies partly
                lo, hi = cond.reproduced.low, cond.reproduced.high
                assert cond.partly.low <= lo and cond.partly.high >= hi


def test_only_selects_and_refuses_unknown_ids() -> None:
    assert [c.id for c in select("c9, C7")] == ["C7", "C9"]
    assert len(select(None)) == 10
    with pytest.raises(ValueError, match=r"unknown claim\(s\) C11, X; known: C1, C2"):
        select("C7,C11,X")
    with pytest.raises(ValueError, match="give claim ids"):
        select(" , ")
