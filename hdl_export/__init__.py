"""Reserved for a later capability (see DESIGN.md)."""
