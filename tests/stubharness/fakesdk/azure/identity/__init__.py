"""Fake azure-identity: the managed identity is the VM's (nothing to check here)."""


class ManagedIdentityCredential:
    pass
