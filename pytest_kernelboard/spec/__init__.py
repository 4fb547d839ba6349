"""Stage 1: the task spec (task.yml, catalog, sidecar, cases, scaffold)."""
