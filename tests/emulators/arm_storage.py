"""Microsoft.Storage for the ARM emulator (tests/emulators/arm.py): what trainvm's payload store
(provisioner/providers/azure/store.py) uses through azure-mgmt-storage.

Modelled, under ``/subscriptions/S/resourceGroups/RG/providers/Microsoft.Storage/storageAccounts/NAME``:
- PUT (StorageAccountCreateParameters): 202 + Location, the operation then answers 200 with the account (the
  SDK's ``begin_create``); an account already in this group is updated (200). A name outside ``[a-z0-9]{3,24}``
  -> 400 AccountNameInvalid (*); a name in ``State.taken_storage_names`` (another tenant's account) or in
  another group -> 409 StorageAccountAlreadyTaken (*) ("The storage account named X is already taken.").
- POST ``/subscriptions/S/providers/Microsoft.Storage/checkNameAvailability`` (``check_account_name``).
- GET -> the account (``primaryEndpoints.blob`` = ``https://NAME.blob.core.windows.net/``), 404 ResourceNotFound.
- POST ``/listKeys`` -> two keys; ``State.storage_keys[NAME]`` presets key1 (tests give Azurite the same key), else
  key1 is ``default_key(NAME)``, the key the shared Azurite (azurite_server.shared) knows the account by.
- PUT/GET ``/blobServices/default/containers/C`` (BlobContainer): container names 3-63 lowercase letters,
  digits and single hyphens (400 ContainerOperationFailure); ``publicAccess`` other than None on an account with
  ``allowBlobPublicAccess: false`` -> 409 PublicAccessNotPermitted (*).
- PUT/GET ``/managementPolicies/default`` (ManagementPolicy): the name must be ``default``; rule names unique; each
  ``prefixMatch`` must start with a container name (Microsoft's lifecycle-policy docs).
- role assignments at a container's scope (``.../containers/C/providers/Microsoft.Authorization/roleAssignments/N``,
  arm_roles.py); deleting the resource group deletes its accounts and the assignments under them.
Request bodies are checked against schemas generated from azure-mgmt-storage's own models (``model_schema``):
the wire names and read-only-ness from ``_attr_to_rest_field``, types, enums and required members from the
annotations; an unknown member is 400 InvalidRequestContent as for the other resource types.
Not modelled: the data plane (Azurite is the blob service in tests: a container PUT here is mirrored there by
the test's ``after_request`` hook), keys regeneration, SAS, network rules, encryption, account kinds/SKUs
semantics, the lifecycle policy actually deleting anything, and the storage-account name being taken by an
account deleted recently in another tenant. (*) codes seen in real Azure output (public issue reports).
"""
from __future__ import annotations

import base64
import datetime
import hashlib
import os
import re
import typing

from . import arm_validate as V
from .arm_catalog import now
from .arm_faults import rg_not_found
from .arm_validate import ANY, BOOL, INT, NUM, STR, ArmError, Arr, Enum, MapOf, Obj

STORAGE_T = "Microsoft.Storage/storageAccounts"
_SCHEMAS: dict[str, Obj] = {}


def model_schema(cls, _seen=None):
    """An arm_validate schema from an azure-mgmt hybrid model class (request members only are writable)."""
    import enum

    import azure.mgmt.storage.models as M
    seen = {} if _seen is None else _seen
    if cls.__name__ in seen:
        return seen[cls.__name__]
    cls()  # the hybrid models fill _attr_to_rest_field on first instantiation
    hints = typing.get_type_hints(cls, localns={"_models": M})
    fields, readonly, required = {}, [], []
    obj = Obj(cls.__name__, fields)
    seen[cls.__name__] = obj
    for attr, rf in cls._attr_to_rest_field.items():
        if "create" not in (rf._visibility or ["create"]):
            readonly.append(rf._rest_name)
            continue
        hint = hints.get(attr, typing.Any)
        args = typing.get_args(hint)
        if not (typing.get_origin(hint) is typing.Union and type(None) in args):
            required.append(rf._rest_name)
        fields[rf._rest_name] = _type_schema(hint, seen, M, enum)
    obj.readonly, obj.required = set(readonly), tuple(required)
    return obj


def _type_schema(hint, seen, M, enum):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        args = [a for a in args if a is not type(None)]
        enums = [a for a in args if isinstance(a, type) and issubclass(a, enum.Enum)]
        if enums:
            return Enum(enums[0].__name__, *[e.value for e in enums[0]])
        models = [a for a in args if isinstance(a, type) and hasattr(a, "_attr_to_rest_field") or
                  isinstance(a, type) and a.__module__.startswith("azure.mgmt.storage.models")]
        if models:
            return model_schema(models[0], seen)
        return _type_schema(args[0], seen, M, enum) if len(args) == 1 else STR
    if origin in (list, typing.List):
        return Arr(_type_schema(args[0], seen, M, enum))
    if origin in (dict, typing.Dict):
        return MapOf(_type_schema(args[1], seen, M, enum))
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return Enum(hint.__name__, *[e.value for e in hint])
        if hint.__module__.startswith("azure.mgmt.storage.models"):
            return model_schema(hint, seen)
        return {bool: BOOL, int: INT, float: NUM, str: STR, datetime.datetime: STR}.get(hint, ANY)
    return ANY


def schema(name):
    """The schema of azure-mgmt-storage model ``name`` (built once)."""
    if name not in _SCHEMAS:
        import azure.mgmt.storage.models as M
        _SCHEMAS[name] = model_schema(getattr(M, name))
    return _SCHEMAS[name]


def _not_found(kind, name, rg):
    return ArmError(404, "ResourceNotFound", f"The Resource '{kind}/{name}' under resource group '{rg}' was not "
                    "found. For more details please go to https://aka.ms/ARMResourceNotFoundFix")


class StorageMixin:
    """Storage accounts; mixed into arm_state.State (runs under ArmEmulator's lock)."""

    # set by State.__init__: self.accounts {name: rec}, self.taken_storage_names, self.storage_keys

    def account(self, rg, name, required=True):
        rec = self.accounts.get(name.lower())
        if rec is None or rec["rg"] != rg.lower():
            if required:
                raise _not_found(STORAGE_T, name, rg)
            return None
        return rec

    def account_scope(self, rec):
        return f"/subscriptions/{self.sub}/resourceGroups/{rec['group']}/providers/{STORAGE_T}/{rec['name']}"

    def put_account(self, rg, name, body, polls, method_path):
        if not re.fullmatch(r"[a-z0-9]{3,24}", name):
            raise ArmError(400, "AccountNameInvalid", f"{name} is not a valid storage account name. Storage account "
                           "name must be between 3 and 24 characters in length and use numbers and lower-case "
                           "letters only.", target=name)
        self.writable_group(rg)
        ignored = []
        body = V.validate(schema("StorageAccountCreateParameters"), body if isinstance(body, dict) else {}, "", ignored)
        loc = (body.get("location") or "").lower().replace(" ", "")
        self.check_location(loc, STORAGE_T)
        other = self.accounts.get(name)
        if name in self.taken_storage_names or (other is not None and other["rg"] != rg.lower()):
            raise ArmError(409, "StorageAccountAlreadyTaken", f"The storage account named {name} is already taken.",
                           target=name)
        if other is not None:  # an update of this group's account: synchronous
            if other["location"] != loc:
                raise ArmError(409, "InvalidResourceLocation", f"The resource '{name}' already exists in location "
                               f"'{other['location']}' in resource group '{rg}'.")
            other["body"] = body
            return 200, None, self.render_account(other), ignored
        key = self.storage_keys.get(name) or default_key(name)
        rec = {"name": name, "rg": rg.lower(), "group": self.group(rg)["name"], "location": loc, "body": body,
               "keys": [key, base64.b64encode(os.urandom(64)).decode()], "containers": {}, "policy": None,
               "state": "Creating", "created": now()}
        self.accounts[name] = rec

        def finish(fail):
            if self.accounts.get(name) is not rec:
                raise ArmError(409, "OperationPreempted", "The storage account was deleted during its creation.")
            rec["state"] = "Succeeded"
            return self.render_account(rec)
        never = bool(self.take_fault("lro", *method_path))
        op = self.new_op("Microsoft.Storage", loc, polls, finish, never)
        return 202, op, None, ignored

    def check_account_name(self, body):
        """POST /subscriptions/S/providers/Microsoft.Storage/checkNameAvailability (StorageAccounts_CheckNameAvailability,
        https://learn.microsoft.com/rest/api/storagerp/storage-accounts/check-name-availability): body
        StorageAccountCheckNameAvailabilityParameters {name, type: "Microsoft.Storage/storageAccounts"}; answer 200
        CheckNameAvailabilityResult {nameAvailable, reason: AccountNameInvalid | AlreadyExists, message}, reason and
        message only when the name is not available. An account of that name anywhere (this subscription's own
        included: names are global) or in ``taken_storage_names`` is AlreadyExists."""
        body = V.validate(schema("StorageAccountCheckNameAvailabilityParameters"), body if isinstance(body, dict) else {},
                          "")
        name = body["name"]
        if body["type"] != STORAGE_T:
            raise ArmError(400, "InvalidResourceType", f"The resource type '{body['type']}' is not supported.")
        if not re.fullmatch(r"[a-z0-9]{3,24}", name):
            return {"nameAvailable": False, "reason": "AccountNameInvalid", "message": f"{name} is not a valid storage "
                    "account name. Storage account name must be between 3 and 24 characters in length and use "
                    "numbers and lower-case letters only."}
        if name in self.taken_storage_names or name in self.accounts:
            return {"nameAvailable": False, "reason": "AlreadyExists",
                    "message": f"The storage account named {name} is already taken."}
        return {"nameAvailable": True}

    def render_account(self, rec):
        b, n = rec["body"], rec["name"]
        props = dict(b.get("properties") or {})
        props.update(provisioningState=rec["state"], creationTime=rec["created"], primaryLocation=rec["location"],
                     statusOfPrimary="available", primaryEndpoints={
                         "blob": f"https://{n}.blob.core.windows.net/", "queue": f"https://{n}.queue.core.windows.net/",
                         "table": f"https://{n}.table.core.windows.net/", "file": f"https://{n}.file.core.windows.net/",
                         "dfs": f"https://{n}.dfs.core.windows.net/", "web": f"https://{n}.z13.web.core.windows.net/"})
        return {"id": self.account_scope(rec), "name": n, "type": STORAGE_T, "location": rec["location"],
                "tags": b.get("tags") or {}, "kind": b.get("kind"),
                "sku": {"name": (b.get("sku") or {}).get("name"), "tier": "Standard"}, "properties": props}

    def list_keys(self, rg, name):
        rec = self.account(rg, name)
        return {"keys": [{"keyName": f"key{i + 1}", "value": k, "permissions": "FULL", "creationTime": rec["created"]}
                         for i, k in enumerate(rec["keys"])]}

    def container(self, method, rg, name, container, body):
        rec = self.account(rg, name)
        if method == "GET":
            c = rec["containers"].get(container)
            if c is None:
                raise ArmError(404, "ContainerNotFound", "The specified container does not exist.")
            return 200, self.render_container(rec, container, c)
        if method != "PUT":
            raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
        if not re.fullmatch(r"[a-z0-9](?:[a-z0-9]|-(?!-)){1,61}[a-z0-9]", container):
            raise ArmError(400, "ContainerOperationFailure", "The specifed resource name contains invalid characters.")
        body = V.validate(schema("BlobContainer"), body if isinstance(body, dict) else {}, "")
        access = ((body.get("properties") or {}).get("publicAccess") or "None")
        if access.lower() != "none" and (rec["body"].get("properties") or {}).get("allowBlobPublicAccess") is False:
            raise ArmError(409, "PublicAccessNotPermitted", "Public access is not permitted on this storage account.")
        created = container not in rec["containers"]
        rec["containers"][container] = {"body": body, "modified": now()}
        return (201 if created else 200), self.render_container(rec, container, rec["containers"][container])

    def render_container(self, rec, name, c):
        props = dict(c["body"].get("properties") or {})
        props.setdefault("publicAccess", "None")
        props.update(lastModifiedTime=c["modified"], leaseStatus="Unlocked", leaseState="Available",
                     hasImmutabilityPolicy=False, hasLegalHold=False)
        return {"id": f"{self.account_scope(rec)}/blobServices/default/containers/{name}", "name": name,
                "type": "Microsoft.Storage/storageAccounts/blobServices/containers", "etag": '"0x8D0"',
                "properties": props}

    def management_policy(self, method, rg, name, policy, body):
        rec = self.account(rg, name)
        if policy != "default":
            raise ArmError(400, "InvalidManagementPolicyName", "The management policy name must be 'default'.")
        if method == "GET":
            if rec["policy"] is None:
                raise ArmError(404, "ManagementPolicyNotFound", f"No ManagementPolicy found for account {name}")
            return 200, self.render_policy(rec)
        if method != "PUT":
            raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed.")
        body = V.validate(schema("ManagementPolicy"), body if isinstance(body, dict) else {}, "")
        rules = (((body.get("properties") or {}).get("policy") or {}).get("rules")) or []
        if len({r["name"] for r in rules}) != len(rules):
            raise ArmError(400, "InvalidManagementPolicyRule", "Rule names must be unique.")
        for r in rules:
            for prefix in ((r["definition"].get("filters") or {}).get("prefixMatch") or []):
                if not re.match(r"[a-z0-9](?:[a-z0-9]|-(?!-)){1,61}[a-z0-9](/|$)", prefix):
                    raise ArmError(400, "InvalidManagementPolicyRule", f"The prefix '{prefix}' must start with a "
                                   "container name.")
        rec["policy"] = {"body": body, "modified": now()}
        return 200, self.render_policy(rec)

    def render_policy(self, rec):
        p = rec["policy"]
        return {"id": f"{self.account_scope(rec)}/managementPolicies/default", "name": "DefaultManagementPolicy",
                "type": "Microsoft.Storage/storageAccounts/managementPolicies",
                "properties": {"lastModifiedTime": p["modified"], "policy": p["body"]["properties"]["policy"]}}

    def drop_accounts(self, rg):
        for key in [k for k, r in self.accounts.items() if r["rg"] == rg.lower()]:
            del self.accounts[key]

    def container_scope_exists(self, rg, name, container):
        rec = self.account(rg, name, required=False)
        return rec is not None and container in rec["containers"]


class StorageRoutes:
    """Routing of Microsoft.Storage requests; mixed into arm_http.ArmRouter."""

    def _storage(self, method, rg, rest, lrest, q, body, rec, api, mp):
        """rest: the segments after ``providers/Microsoft.Storage`` (``storageAccounts/NAME/...``)."""
        st = self.state
        if self.state.group(rg, required=False) is None:
            raise rg_not_found(rg)
        if lrest[:1] != ["storageaccounts"] or len(rest) < 2:
            raise ArmError(404, "NotFound", f"No route for {method} {mp[1]} in the emulator.")
        name = rest[1]
        if len(rest) == 2:
            if method == "PUT":
                status, op, out, rec.ignored = st.put_account(rg, name, body, self.polls, mp)
                if op is None:
                    return status, {}, out
                return 202, {"Location": self._op_url(op, api, location=True), "Retry-After": "0"}, None
            if method == "GET":
                return 200, {}, st.render_account(st.account(rg, name))
        if len(rest) == 3 and lrest[2] == "listkeys" and method == "POST":
            return 200, {}, st.list_keys(rg, name)
        if len(rest) == 4 and lrest[2] == "managementpolicies":
            return (*self._two(st.management_policy(method, rg, name, rest[3], body)),)
        if len(rest) >= 6 and lrest[2:5] == ["blobservices", "default", "containers"]:
            container = rest[5]
            if len(rest) == 6:
                return (*self._two(st.container(method, rg, name, container, body)),)
            if len(rest) in (9, 10) and lrest[6:9] == ["providers", "microsoft.authorization", "roleassignments"]:
                st.account(rg, name)
                if not st.container_scope_exists(rg, name, container):
                    raise ArmError(404, "ContainerNotFound", "The specified container does not exist.")
                scope = (f"/subscriptions/{st.sub}/resourceGroups/{st.group(rg)['name']}/providers/{STORAGE_T}/"
                         f"{name}/blobServices/default/containers/{container}")
                status, out = st.role_assignment(method, rg, rest[9] if len(rest) == 10 else None, body, api,
                                                 scope=scope)
                return status, {}, out
        raise ArmError(404 if method == "GET" else 405, "NotFound" if method == "GET" else "MethodNotAllowed",
                       f"No route for {method} {mp[1]} in the emulator.")

    @staticmethod
    def _two(status_out):
        status, out = status_out
        return status, {}, out


def default_key(name: str) -> str:
    """A storage account's key1 when no test preset one: derived from its name (azurite_server.shared uses it)."""
    return base64.b64encode(hashlib.sha256(name.encode()).digest() * 2).decode()
