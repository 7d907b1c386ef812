"""Baked images (``trainvm bake``): a private image of a profile's locked stack, so that ``up`` only verifies.

* ``identity``: what a baked image *is* (stack hash, lock sha256, script version, base OS image), its
  label encoding and the match against a profile (use it, or the exact reason why not). Pure.
* The startup script's image modes (``render_script(..., image_mode="bake"|"baked")``): templates.
* Cloud capture: the ``Baker`` capability (providers/base.py), registered per cloud in providers/registry.py.

See docs/bake.md.
"""
