"""Profiles: the YAML format, loading with line numbers, ``extends`` and the canonical hash."""

from provisioner.profile.loader import LoadedProfile, load_profile, profile_hash

__all__ = ["LoadedProfile", "load_profile", "profile_hash"]
