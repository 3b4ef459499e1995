"""Session records: the format (:mod:`.format`), stores that keep them, and resuming from them.

See docs/sessions.md for the format and what a host can plug in.
"""
