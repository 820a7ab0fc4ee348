"""A stand-in for matplotlib (not installed in CI): the tutorials only draw figures, which a
test does not look at, so every pyplot call is accepted and does nothing."""
