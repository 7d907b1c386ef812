"""Credentials found by their format and entropy, whatever the key they sit under, and redaction.

``find_secret(text)`` names what a string looks like when it carries a credential (None otherwise): the
common token formats (cloud keys, Git hosting, package registries, chat, payment, AI APIs), private-key
blocks, service-account JSON (also base64-encoded), Azure client secrets and storage keys, 40-hex keys,
URL userinfo (``postgres://user:pass@``, ``https://__token__:...@``), presigned/signed URL parameters
(``X-Goog-Signature``, ``X-Amz-Signature``, ``sig=``, ``token=``...), and long high-entropy strings.
``redact(text)`` replaces each of those, and every URL query string, with ``***`` so an error message
can say what it rejected without repeating it. Checked against false positives: the bundled profiles,
paths, versions, pins, ``--hash=sha256:`` digests and CUBLAS settings such as ``:4096:8`` pass.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter

# (pattern, description). Patterns match inside a larger text; keep them anchored on distinctive prefixes.
PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), what) for p, what in (
    (r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b", "an AWS access key id"),
    (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----", "a private key"),
    (r"\"(?:type|private_key|private_key_id|client_email)\"\s*:\s*\"(?:service_account|[^\"]{8,})\"", "a service-account key (JSON)"),
    (r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{40,}", "a GitHub token"),
    (r"\bglpat-[A-Za-z0-9_-]{20,}", "a GitLab token"),
    (r"\bhf_[A-Za-z0-9]{30,}", "a Hugging Face token"),
    (r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}", "an AI API secret key"),
    (r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", "a Stripe secret key"),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "a Slack token"),
    (r"hooks\.slack\.com/services/T[A-Za-z0-9_/]{20,}", "a Slack webhook URL"),
    (r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}", "a Discord webhook URL"),
    (r"\bAIza[0-9A-Za-z_-]{35}", "a Google API key"),
    (r"\bya29\.[A-Za-z0-9_-]{20,}", "a Google OAuth access token"),
    (r"\b1//0[A-Za-z0-9_-]{30,}", "a Google OAuth refresh token"),
    (r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", "a JWT bearer token"),
    (r"(?i)AccountKey=[A-Za-z0-9+/=]{20,}|SharedAccessSignature=|SharedAccessKey=[A-Za-z0-9+/=]{20,}", "an Azure storage or Service Bus key"),
    (r"\b[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", "an Azure client secret"),
    (r"\bnpm_[A-Za-z0-9]{36}\b", "an npm token"),
    (r"\bpypi-AgE[A-Za-z0-9_-]{50,}", "a PyPI token"),
    (r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", "a SendGrid key"),
    (r"\bdapi[0-9a-f]{32}\b", "a Databricks token"),
    (r"\bdop_v1_[0-9a-f]{64}\b", "a DigitalOcean token"),
    (r"\bshp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}\b", "a Shopify token"),
    (r"\bAGE-SECRET-KEY-1[0-9A-Z]{50,}", "an age secret key"),
    (r"\bSK[0-9a-f]{32}\b", "a Twilio API key"),
    (r"\bkey-[0-9a-f]{32}\b", "a Mailgun key"),
    (r"(?i)\b(?:Basic|Bearer)\s+[A-Za-z0-9+/=._~-]{16,}", "an HTTP authorization credential"),
    (r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[0-9/+])"
     r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", "an AWS secret access key"),
))
HEX40_WHAT = "a 40-hex key (an API key or token)"
HEX40 = re.compile(r"(?<![0-9a-fA-F:])[0-9a-f]{40}(?![0-9a-fA-F])")  # also a git commit id: see ``guess``
#: URL userinfo: scheme://user:password@ (any scheme) or a long token as the user name.
USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)(?:[^/@\s:?#]*:[^/@\s?#]*|[^/@\s:?#]{20,})@", re.I)
#: Query parameters that carry a signature or a credential (presigned GCS/S3 URLs, Azure SAS, tokens).
SIGNED_PARAM = re.compile(
    r"(?i)[?&;](X-Goog-Signature|X-Goog-Credential|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|"
    r"GoogleAccessId|Signature|sig|se|token|access_token|auth|apikey|api_key|key|password|passwd|pwd|secret|"
    r"client_secret|code)=[^&\s#]+")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.I)
#: Candidates for the entropy test and for base64-decoding (service-account JSON in base64).
TOKEN = re.compile(r"[A-Za-z0-9+/=_~.-]{24,}")
HASH_PREFIX = re.compile(r"(?:sha256|sha384|sha512|sha1|md5)[:=]$", re.I)
MIN_ENTROPY = 4.3  # bits per character; English words and paths stay well below, random base64 is ~5.5+


def entropy(text: str) -> float:
    counts, n = Counter(text), len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def _random_token(token: str) -> bool:
    """Long, mixed-class and high-entropy: what keys look like and words, paths and versions do not."""
    core = token.strip("=._~-")
    if len(core) < 24 or "/" in core.strip("/") and core.count("/") > 2:  # paths
        return False
    classes = sum(bool(re.search(p, core)) for p in ("[a-z]", "[A-Z]", "[0-9]"))
    return classes == 3 and entropy(core) >= MIN_ENTROPY


def _decoded_json_key(token: str) -> bool:
    """A base64 (or base64url) blob that decodes to service-account / credential JSON."""
    if len(token) < 40:
        return False
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            text = decode(token + "=" * (-len(token) % 4)).decode("utf-8", "strict")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if re.search(r"\"(?:type|private_key|client_secret|refresh_token)\"\s*:", text):
            return True
    return False


def find_secret(text: str, *, guess: bool = True) -> str | None:
    """What ``text`` looks like when it carries a credential; None when it does not. ``guess=False`` keeps
    to unambiguous formats (no 40-hex, no entropy test): for files that hold digests and commit ids."""
    if not text or text.startswith("secret://"):
        return None
    for pattern, what in PATTERNS:
        if pattern.search(text):
            return what
    if guess and HEX40.search(text):
        return HEX40_WHAT
    if USERINFO.search(text):
        return "a URL with a user name and password (or token) in it"
    for url in URL.findall(text):
        m = SIGNED_PARAM.search(url)
        if m:
            return f"a signed or credential-carrying URL (query parameter {m.group(1)})"
    if not guess:
        return None
    for m in TOKEN.finditer(text):
        token = m.group(0)
        if HASH_PREFIX.search(text[max(0, m.start() - 7):m.start()]):
            continue  # --hash=sha256:... in a lock file: a digest, not a key
        if _decoded_json_key(token):
            return "a base64-encoded credential file (service-account JSON)"
        if _random_token(token):
            return "a high-entropy string (a key or token)"
    return None


def redact(text: str) -> str:
    """``text`` with every credential found by ``find_secret``'s rules, URL userinfo and URL query string
    replaced by ``***`` (for messages, logs and reports). 40-hex strings stay: in a message they are commit ids
    and digests far more often than keys (``find_secret`` still rejects them as input values)."""
    text = USERINFO.sub(lambda m: f"{m.group(1)}***@", text)
    text = URL.sub(lambda m: m.group(0).split("?", 1)[0] + ("?***" if "?" in m.group(0) else ""), text)
    for pattern, _ in PATTERNS:
        text = pattern.sub("***", text)

    def token(m: re.Match[str]) -> str:
        t = m.group(0)
        if HASH_PREFIX.search(text[max(0, m.start() - 7):m.start()]):
            return t
        return "***" if _random_token(t) or _decoded_json_key(t) else t

    return TOKEN.sub(token, text)
