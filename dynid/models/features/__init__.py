"""Feature maps of paths shared by backends (today: truncated log-signatures)."""
