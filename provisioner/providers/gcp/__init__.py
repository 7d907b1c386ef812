"""Everything trainvm knows about gcp lives in this package (no SDK is imported here)."""
