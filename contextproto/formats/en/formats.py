"""English date formats with seconds: operators compare turns, dispatches and job attempts
that happen within the same minute, and Django's "Dec. 3, 2026, 9:07 p.m." hides that.

ISO-like and sortable, in the active time zone (settings.TIME_ZONE, UTC by default), which
`T` names. Used by every template and admin changelist that renders a datetime.
"""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
