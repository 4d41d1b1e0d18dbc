"""Unknown names get the name meant: digit runs compared as numbers, letters in any case.

``gpu7`` on a 64-GPU fabric was offered ``gpu0057`` (difflib's closest spelling), not
``gpu0007``; ``leaf0->spine1`` was offered ``leaf10->spine01``.
"""

from __future__ import annotations

import difflib
from typing import Any

import pytest

import fabric_core.commands as commands_module
from console.screens.fault_form import build_inject
from fabric_core.commands import (
    MAX_SHOWN_NAME,
    MAX_SUGGESTION_CHOICES,
    ClearFault,
    CommandError,
    InjectFault,
    closest_names,
    unknown,
)
from fabric_core.runtime.engine import Engine
from tests.console_synthetic import snapshot
from tests.helpers import bulk_leaf_spine

GPUS = [f"gpu{i:04d}" for i in range(64)]
LINKS = [f"leaf{i:02d}->spine{j:02d}" for i in range(16) for j in range(8)]


@pytest.mark.parametrize(
    ("typed", "choices", "meant"),
    [
        ("gpu7", GPUS, "gpu0007"),  # was gpu0057
        ("gpu07", GPUS, "gpu0007"),
        ("GPU0007", GPUS, "gpu0007"),
        ("gpu00000007", GPUS, "gpu0007"),
        ("gpu0", GPUS, "gpu0000"),  # 0 is a number too
        ("gpu57", GPUS, "gpu0057"),
        ("leaf0->spine1", LINKS, "leaf00->spine01"),  # was leaf10->spine01
        ("LEAF1->Spine0", LINKS, "leaf01->spine00"),
        ("f00", [f"f{i}" for i in range(12)], "f0"),
        ("Spine", ["leaf", "spine"], "spine"),  # no digits: the letters in any case
        ("gpu.7", ["gpux7", "gpu.07"], "gpu.07"),  # a '.' is a dot, not any character
        # no name spelled so: the closest spelling, as before
        ("leaf07->spine99", LINKS, "leaf07->spine07"),
        # nor spelled close: the name of the same numbers
        ("gpx7", GPUS, "gpu0007"),
        ("fault3", [f"f{i}" for i in range(12)], "f3"),
    ],
)
def test_the_name_meant_is_suggested(typed: str, choices: list[str], meant: str) -> None:
    assert closest_names(typed, choices) == [meant]
    assert f"(did you mean {meant!r}?)" in str(unknown("name", typed, choices))


@pytest.mark.parametrize(
    ("typed", "choices"),
    [
        ("gpu1", ["gpu0011", "gpu0010", "gpu0100"]),  # 1 is not 11, 10 or 100
        ("leaf1->spine2", ["leaf11->spine02", "leaf01->spine20"]),
        ("gpu70", GPUS[:8]),
    ],
)
def test_another_number_is_not_the_same_name(typed: str, choices: list[str]) -> None:
    """A number is compared whole: ``gpu1`` is not ``gpu0011`` spelled otherwise (the
    fallback may still offer it as the closest spelling, but not as the same name)."""
    same, _ = commands_module._numbered_patterns(typed)
    assert not any(same.fullmatch(c) for c in choices)


def test_several_names_are_offered_best_first() -> None:
    assert closest_names("gpu7", ["gpu07", "gpu0007", "gpu0008"], n=3) == ["gpu07", "gpu0007"]
    assert closest_names("gpx7", ["leaf07", "gpu0007", "spine07"], n=1) == ["gpu0007"]
    assert closest_names("gpu7", GPUS, n=0) == []


@pytest.mark.parametrize("typed", ["", "gpu\u0663", "gpu(7", "[0-9]", "\\d+", "7" * 100, "x" * 500])
def test_odd_names_get_an_answer_not_an_exception(typed: str) -> None:
    closest_names(typed, GPUS + LINKS, n=3)
    assert "unknown GPU" in str(unknown("GPU", typed, GPUS))


def test_a_name_longer_than_any_gets_no_suggestion() -> None:
    assert closest_names("gpu" + "0" * MAX_SHOWN_NAME + "7", GPUS) == []


def test_matching_a_large_fabric_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """300,000 link names: the same name found by one pass, without difflib; a name of
    the same numbers compared with difflib over at most ``MAX_SUGGESTION_CHOICES``."""
    links = [f"leaf{i:04d}->spine{j:03d}" for i in range(1200) for j in range(250)]
    compared: list[int] = []
    close_matches = difflib.get_close_matches

    def counting(word: str, names: list[str], n: int, cutoff: float) -> list[str]:
        compared.append(len(names))
        return close_matches(word, names, n=n, cutoff=cutoff)

    monkeypatch.setattr(difflib, "get_close_matches", counting)
    assert closest_names("leaf7->spine3", links) == ["leaf0007->spine003"]
    assert compared == []
    assert closest_names("qq47-3", links) == ["leaf0047->spine003"]
    assert compared and max(compared) <= MAX_SUGGESTION_CHOICES


# ------------------------------------------------------------------ through the user's paths
@pytest.mark.parametrize(
    ("cmd", "message"),
    [
        (
            InjectFault(kind="version_mismatch", target="gpu7"),
            "unknown gpu 'gpu7' (did you mean 'gpu0007'?)",
        ),
        (
            InjectFault(kind="incast", target="GPU12"),
            "unknown gpu 'GPU12' (did you mean 'gpu0012'?)",
        ),
        (
            InjectFault(kind="link_down", target="leaf0->spine1"),
            "unknown link 'leaf0->spine1' (did you mean 'leaf00->spine01'?)",
        ),
        (
            InjectFault(kind="switch_down", target="spine1"),
            "unknown switch 'spine1' (did you mean 'spine01'?)",
        ),
    ],
)
def test_the_engine_suggests_the_name_meant(cmd: Any, message: str) -> None:
    result = Engine(bulk_leaf_spine(leaves=8, spines=4, gpus_per_leaf=8)).apply(cmd)
    assert not result.ok and result.error is not None
    assert message in result.error


def test_a_fault_and_its_target_are_suggested_with_their_numbers() -> None:
    engine = Engine(bulk_leaf_spine(leaves=8, spines=4, gpus_per_leaf=8))
    ids = [
        engine.apply(InjectFault(kind="link_down", target=f"leaf00->spine0{i}")).detail["fault_id"]
        for i in range(3)
    ]
    assert ids == ["f0", "f1", "f2"]
    result = engine.apply(ClearFault(fault_id="F01"))
    assert result.error is not None and "(did you mean 'f1'?)" in result.error
    result = engine.apply(ClearFault(target="leaf0->spine2"))
    assert result.error is not None and "(did you mean 'leaf00->spine02'?)" in result.error


def test_the_console_form_suggests_the_link_meant() -> None:
    with pytest.raises(CommandError, match=r"did you mean 'leaf01->spine00'\?"):
        build_inject("link_down", "leaf1->spine0", "", "", snapshot())
