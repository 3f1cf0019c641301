"""Export and import of a store's facts.

- :mod:`.jsonl`: JSON lines, lossless (every field, the archive, history, links);
  records in :mod:`.jsonl_records`, reading in :mod:`.jsonl_import`.
- :mod:`.markdown`: the live facts as Markdown bullets, and notes read back
  (:mod:`.markdown_memory`, :mod:`.markdown_files`, :mod:`.markdown_import`).
- :mod:`.import_writer`: every import is written through it, in one transaction,
  with ids kept or renumbered (:mod:`.id_map`); :mod:`.report` says what happened.
"""
