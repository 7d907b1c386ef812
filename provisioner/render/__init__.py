"""Startup scripts: rendering the templates for a profile on a machine (SPEC "Startup script
contract"; the payload and the bootstrap: docs/vm.md "The payload").

    from provisioner.render import render_script, target_from_offer
    offer = make_plan(loaded_profile).plan.chosen         # provisioner.planner.from_profile: the cheapest offer
    rendered = render_script(loaded_profile, target_from_offer(offer))
    rendered.startup_sh, rendered.user_data, rendered.sizes
"""

from provisioner.render.context import build_context, stack_fields
from provisioner.render.script import RenderedScript, render_for_offer, render_script
from provisioner.render.script_context import RenderTarget, ScriptContext, is_nvswitch_shape, target_from_offer
from provisioner.render.shell import shq, template_env

__all__ = [
    "RenderTarget",
    "RenderedScript",
    "ScriptContext",
    "build_context",
    "is_nvswitch_shape",
    "render_for_offer",
    "render_script",
    "shq",
    "stack_fields",
    "target_from_offer",
    "template_env",
]
