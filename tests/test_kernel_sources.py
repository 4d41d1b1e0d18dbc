"""The kernels copy arrays with loops, never with a slice assignment (``a[:n] = b[:n]``):
numba compiles a slice assignment with a shape check whose error message formats the
shapes, about 2.4 s of a first start (docs/MODEL.md, "How the tick is computed"). A
source check, since a test may not time the compiler: every assignment in
``fabric_core/tick/kernels`` whose target is a slice of an array, unless what it assigns
is a number (a fill, which compiles no shape check)."""

from __future__ import annotations

import ast
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[1] / "fabric_core" / "tick" / "kernels"


def _is_slice(target: ast.expr) -> bool:
    if not isinstance(target, ast.Subscript):
        return False
    index = target.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(isinstance(p, ast.Slice) for p in parts)


def slice_copies(source: str, name: str = "<source>") -> list[str]:
    """``name:line`` of each assignment to an array slice from something not a number."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AugAssign):
            targets, value = [node.target], node.value
        else:
            continue
        number = isinstance(value, ast.Constant) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant)
        )
        if not number and any(_is_slice(t) for t in targets):
            found.append(f"{name}:{node.lineno}")
    return found


def test_no_kernel_copies_an_array_into_a_slice() -> None:
    found = [
        hit
        for path in sorted(KERNELS.glob("*.py"))
        if path.name != "tick.py"  # (Python: the compiled tick's wrappers, not kernels)
        for hit in slice_copies(path.read_text(), path.name)
    ]
    assert found == []


def test_the_check_finds_slice_copies_and_passes_fills_and_loops() -> None:
    source = (
        "def k(a, b, n):\n"
        "    a[:n] = b[:n]\n"  # a slice copy
        "    a[1:] += b[:-1]\n"  # and an augmented one
        "    a[:] = 0.0\n"  # a fill: allowed
        "    a[:] = -1\n"  # a negative fill: allowed
        "    for i in range(n):\n"
        "        a[i] = b[i]\n"  # a loop: allowed
    )
    assert slice_copies(source) == ["<source>:2", "<source>:3"]


def test_the_index_parts_are_where_the_kernel_says() -> None:
    """``kernels.index`` names each part's place in its buffer by a constant (numba reads a
    module's integers, not a dict): each constant is its part's place in ``PARTS``."""
    from fabric_core.tick.kernels import index

    named = {
        "PART_POS": "pos",
        "PART_HOP": "hop",
        "PART_FLOW": "flow",
        "PART_LINK": "link",
        "PART_QUEUE": "queue",
        "PART_PREV": "prev_pad",
        "PART_NXT": "nxt_pad",
        "PART_BUF": "buf_pad",
        "PART_DRAINS": "drains_pad",
        "PART_FIRST": "first",
        "PART_LENT": "link_ent",
        "PART_ELINK": "ent_link",
        "PART_BUF_ENT": "buf_ent",
        "PART_HEADS": "heads",
        "PART_LAST": "last",
        "PART_LAST_FLOW": "last_flow",
        "PART_KEY_PTR": "key_ptr",
        "PART_USED_LINKS": "used_links",
        "PART_RANK_PTR": "rank_ptr",
        "PART_LINK_PTR": "link_ptr",
        "PART_USED_BUFS": "used_bufs",
        "PART_BUF_GROUP_PTR": "buf_group_ptr",
        "PART_BUF_PTR": "buf_ptr",
        "PART_LANE_BUF": "lane_buf",
        "PART_FEEDFORWARD": "feedforward",
    }
    assert len(named) == len(index.PARTS)
    assert {index.PARTS[getattr(index, c)] for c in named} == set(index.PARTS)
    assert all(index.PARTS[getattr(index, c)] == part for c, part in named.items())


def test_build_index_unpacks_the_parts_in_their_order() -> None:
    """``kernels.tick.index_from_buffer`` takes the index's parts by place, not by name:
    the names it unpacks them into, read from its source, are ``PARTS``, in order."""
    import inspect
    import textwrap

    from fabric_core.tick.kernels import index, tick

    tree = ast.parse(textwrap.dedent(inspect.getsource(tick.index_from_buffer)))
    unpacked = [
        tuple(elt.id for elt in node.targets[0].elts if isinstance(elt, ast.Name))
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Tuple)
        and isinstance(node.value, ast.ListComp)
    ]
    assert unpacked == [index.PARTS]
