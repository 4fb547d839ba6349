"""The pull-request pipeline: gate, evaluation, comment, publication.

Each stage is a `kernelboard pr ...` subcommand so the GitHub workflows stay thin and every
step can be tested (and replayed end to end with `kernelboard pr simulate`).
"""
