"""Reliability checks of ctxslots at full size: concurrency, crash safety, fuzzing.

Run ``python -m reliability all`` (or one of ``concurrency``, ``crash``,
``fuzz``); see RELIABILITY.md for what each checks and the figures measured.
The test suite runs smaller versions of the same checks
(``tests/test_reliability_*.py``).
"""
