"""Stage 4: result records (model, schema, recorder, summary, store, reference runs)."""
