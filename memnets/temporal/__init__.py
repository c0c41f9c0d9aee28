"""Time in memory: time expressions resolved to dates (:mod:`.dates`), the supersession decision
(:mod:`.supersession`: does a newer memory end an older one's validity) and time in retrieval
(:mod:`.questions`: the dates a question names, as a ranking feature)."""
