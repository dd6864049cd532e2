"""Offsets as compact inclusive ranges: ``[3, 4, 5, 9]`` -> ``3-5, 9``.

Gaps and duplicates are named in alerts and check metadata; a lost batch of 10,000 records must
read as one range, not 10,000 numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

OffsetRange = tuple[int, int]


def compress(offsets: Iterable[int]) -> list[OffsetRange]:
    """Sorted, de-duplicated inclusive ``(first, last)`` runs of consecutive offsets."""
    runs: list[list[int]] = []
    for offset in sorted(set(offsets)):
        if runs and offset == runs[-1][1] + 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return [(first, last) for first, last in runs]


def describe(offsets: Iterable[int], max_ranges: int = 20) -> str:
    """``"3-5, 9"``; past ``max_ranges`` runs the rest is summarised (``"… +4 more ranges"``)."""
    return describe_ranges(compress(offsets), max_ranges)


def describe_ranges(runs: list[OffsetRange], max_ranges: int = 20) -> str:
    """:func:`describe` of ranges already compressed (sorted, disjoint, inclusive)."""
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:max_ranges])
    rest = len(runs) - max_ranges
    return shown + (f", … +{rest} more range(s)" if rest > 0 else "")
