"""How both benchmark reports judge a target from its rounds.

Each round measures the two figures of a ratio one after the other, so a
ratio taken within a round carries little of the machine's drift over the
run, which a ratio of best-of figures (often from different rounds) carries
whole. A target is judged on the median of the rounds' own ratios; it is
undecided where fewer than two rounds have both figures (one round cannot
show that another would agree) or where the rounds fall on both sides of it.
"""
import statistics


def median_of_rounds(ratios):
    """The median of the rounds' own ratios (None for a round without
    both figures is left out), None if no round has one."""
    paired = [r for r in ratios if r is not None]
    return statistics.median(paired) if paired else None


def undecided(ratios, meets):
    """Whether these rounds leave a target undecided; `meets(ratio)` says
    whether one ratio meets it."""
    paired = [r for r in ratios if r is not None]
    return len(paired) < 2 or len({meets(r) for r in paired}) > 1
