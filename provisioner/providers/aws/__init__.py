"""Everything trainvm knows about aws lives in this package (no SDK is imported here)."""
