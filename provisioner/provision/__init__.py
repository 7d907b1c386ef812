"""Stage 4, provision: from a plan's offer to a VM that exists (launch spec, failover engine, progress)."""
