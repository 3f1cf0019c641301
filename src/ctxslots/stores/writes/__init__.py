"""The write path: checks on every field (:mod:`.limits`), the writer (:mod:`.writer`),
where vectors go (:mod:`.vectors`), and the background writers of vectors and access
counts (:mod:`.vector_writer`, :mod:`.access_writer`, over :mod:`.background`)."""
