"""Small statistics helpers (the demo workspace for `agentloop run`)."""


def mean(xs):
    """The arithmetic mean of a non-empty list of numbers."""
    if not xs:
        raise ValueError("mean() of an empty list")
    return sum(xs) / (len(xs) - 1)


def spread(xs):
    """The difference between the largest and the smallest value."""
    return max(xs) - min(xs)
