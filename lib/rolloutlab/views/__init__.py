"""What people look at: figures (``plots``), the trajectory explorer (``widgets``), the live view and
the stakeholder report. May import analysis, store, text and config; never cli."""
