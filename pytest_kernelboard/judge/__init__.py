"""Stage 2: the judge (inputs, reference, checks, transport, measurement)."""
