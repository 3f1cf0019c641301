"""Keeping a store healthy and within bounds: pruning (:mod:`.prune`), near-duplicate
consolidation (:mod:`.consolidate`), and checks and rebuilds (:mod:`.doctor`)."""
