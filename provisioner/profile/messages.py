"""Validation messages: kept in provisioner/messages.py (a leaf: output, errors, compat, lock and container print
them without importing the profile package); re-exported here for the profile's own modules."""

from provisioner.messages import Level, Message

__all__ = ["Level", "Message"]
