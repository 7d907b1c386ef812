"""Cloud providers behind one small contract (``base.Provider``). The layers above reach a cloud's code through the
typed hooks of provisioner/hooks/ (the provider registry: ``hooks/providers.py``), loaded when called, so that
``trainvm --help``, ``validate`` and ``plan`` never import a cloud SDK. Importing this package imports nothing."""
