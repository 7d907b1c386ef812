"""Everything trainvm knows about azure lives in this package (no SDK is imported here)."""
