"""English month and weekday names, whatever the process's locale.

``calendar.month_name`` and ``strftime``'s ``%B`` and ``%A`` follow ``LC_TIME``: a
program that calls ``locale.setlocale(locale.LC_ALL, "")`` on a German host would put
"8 Mai 2023" in its prompts and no longer read "July" in a question. Prompts and
questions are read in English, so these names are fixed.
"""

from __future__ import annotations

__all__ = ["MONTH_ABBREVIATIONS", "MONTH_NAMES", "WEEKDAY_NAMES"]

#: Index 1 is January, as in :data:`calendar.month_name` (index 0 is empty).
MONTH_NAMES = ("", "January", "February", "March", "April", "May", "June", "July",
               "August", "September", "October", "November", "December")
#: Index 1 is Jan, as in :data:`calendar.month_abbr`.
MONTH_ABBREVIATIONS = ("", *(name[:3] for name in MONTH_NAMES[1:]))
#: Index 0 is Monday, as :meth:`datetime.date.weekday` counts.
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
                 "Sunday")
