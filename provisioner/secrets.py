"""Credentials found by their format and entropy, whatever the key they sit under, and redaction.

``find_secret(text)`` names what a string looks like when it carries a credential (None otherwise): the
common token formats (cloud keys, Git hosting, package registries, chat, payment, AI APIs), private-key
blocks, service-account JSON (also base64-encoded), Azure client secrets and storage keys, 40-hex keys,
URL userinfo (``postgres://user:pass@``, ``https://__token__:...@``), presigned/signed URL parameters
(``X-Goog-Signature``, ``X-Amz-Signature``, ``sig=``, ``token=``...), and random tokens: long, high-entropy, mixing
lower case, upper case and digits with any symbols, their character classes following each other at random
(``class_surprise``: names, paths and versions run on in one class; ``random_word``).
``redact(text)`` replaces each of those, and every URL query string, with ``***`` so an error message
can say what it rejected without repeating it. Checked against false positives: the bundled profiles,
paths, versions, pins, ``--hash=sha256:`` digests, image digests (``@sha256:...``), model names and CUBLAS settings
such as ``:4096:8`` pass (tests/unit/test_secrets_random.py: generated settings pass, generated tokens are found).
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
    # STS session tokens: base64 of a binary blob that starts "!\n\torigin_ec" (IQoJ...) or, older, "\x17\n\x06er/aws"
    (r"(?:IQoJb3JpZ2luX2Vj|FwoGZXIvYXdz|FQoGZXIvYXdz)[A-Za-z0-9+/=]{60,}", "an AWS session token"),
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
    # a docker config.json: "auth" is base64(user:password), "identitytoken" an OAuth refresh token
    (r"\"(?:auth|identitytoken|registrytoken)\"\s*:\s*\"[A-Za-z0-9+/=._~-]{8,}\"", "a registry credential (docker config.json)"),
    (r"\"password\"\s*:\s*\"[^\"]+\"", "a password (in JSON)"),
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
#: 64 hex digits or more (a generated secret, an HMAC key); after "sha256:" (a lock's --hash, an image digest) it is a
#: digest, and under a key that says so (MODEL_SHA256, ..._DIGEST) ``fields.looks_like_secret`` lets it pass
HEX64_WHAT = "a 64-hex secret (a key, token or password)"
HEX64 = re.compile(r"(?<![0-9a-zA-Z:=+/-])[0-9a-fA-F]{64,}(?![0-9a-zA-Z])")
#: Azure AD (Entra) client secrets in the legacy formats (Microsoft security-utilities, rule SEC101/101): 32
#: characters of letters, digits and .=-:[_@/*]+?, or 34 URL-unreserved characters, with at least one symbol
LEGACY_AZURE_WHAT = "an Azure client secret (legacy format)"
LEGACY_AZURE = (re.compile(r"[A-Za-z0-9.=\-:\[\]_@/*+?]{32}"), re.compile(r"[A-Za-z0-9._~-]{34}"))
#: Where a whole value is looked at word by word (the legacy Azure secrets have no prefix to anchor on).
WORD_SPLIT = re.compile(r"[\s\"',;]+")
AWS_SECRET_WHAT = "an AWS secret access key"
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
#: A whole word (split as ``WORD_SPLIT``; the part after its first '=' too) that mixes classes at random, whatever its
#: symbols (``random_word``)
RANDOM_WHAT = "a random token (a key, password or client secret)"
RANDOM_SPLIT = re.compile(r"[\s\"',;]+")
#: How the character class (l lower, u upper, d digit, s separator -_./:, o any other symbol) follows the previous one
#: in names, paths, URLs, versions and settings: words run on in their class, capitals start words, digits come in
#: groups after a separator, capitals also run on (GPTQ), other symbols are rare. Random tokens switch class at every other character, which this
#: model finds unlikely (``class_surprise``).
CLASS_NEXT = {"l": {"l": .84, "u": .01, "d": .04, "s": .105, "o": .005},
              "u": {"l": .40, "u": .45, "d": .05, "s": .095, "o": .005},
              "d": {"l": .06, "u": .04, "d": .60, "s": .29, "o": .01},
              "s": {"l": .55, "u": .15, "d": .25, "s": .045, "o": .005},
              "o": {"l": .40, "u": .20, "d": .20, "s": .10, "o": .10},
              "^": {"l": .60, "u": .25, "d": .10, "s": .04, "o": .01}}
MIN_SURPRISE_TOTAL = 9.0  # nats: a short word needs more per character (BAAI/Fp16-7B-MISTRAL has 7)
MIN_SURPRISE = 0.35  # nats per character; realistic names and paths stay below (most below 0), random tokens ~1
#: What a 40-character AWS secret key (bare or as URL path segments) must reach on top of its pattern: enough to keep
#: most CamelCase paths out (measured: 4 random keys in 20,000 fall below it or repeat four characters; 1 generated
#: path in 100,000 still reaches it)
NAME_SURPRISE = 0.2
#: The same for the 24+ character entropy tokens (``_random_token``): HuggingFaceH4/Dpo-8x7B-v1.2 reaches 0.25
TOKEN_SURPRISE = 0.3


def entropy(text: str) -> float:
    counts, n = Counter(text), len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def _random_token(token: str) -> bool:
    """Long, mixed-class and high-entropy: what keys look like and words, paths and versions do not."""
    core = token.strip("=._~-")
    if "=" in core:  # KEY=value: base64 has '=' only at its end
        return any(_random_token(part) for part in core.split("="))
    if REPEAT.search(core) or len(core) < 24 or "/" in core.strip("/") and core.count("/") > 2 and "+" not in core:  # paths (base64 has +)
        return False
    classes = sum(bool(re.search(p, core)) for p in ("[a-z]", "[A-Z]", "[0-9]"))
    # names such as HuggingFaceH4/Llama-0.5B-v2.8 are as varied, but their classes follow each other as words do
    return classes == 3 and entropy(core) >= MIN_ENTROPY and class_surprise(core) >= TOKEN_SURPRISE


#: Four letters or digits that come back later in the word: names repeat their words (Qwen/Qwen2.5, RUNS-RUNS),
#: random tokens almost never (about 1 in 25,000 of 40 characters)
REPEAT = re.compile(r"([A-Za-z0-9]{4}).*\1")


def _class(c: str) -> str:
    return "l" if c.islower() else "u" if c.isupper() else "d" if c.isdigit() else "s" if c in "-_./:" else "o"


def class_surprise(word: str) -> float:
    """Per character, how much likelier ``word``'s sequence of character classes is when each class is drawn at
    random (in the word's own proportions) than under ``CLASS_NEXT`` (a log-likelihood ratio, in nats)."""
    n = len(word)
    counts = Counter(map(_class, word))
    drawn = {k: (counts[k] + 0.5) / (n + 2.5) for k in "ludso"}
    prev, total = "^", 0.0
    for k in map(_class, word):
        total += math.log(drawn[k] / CLASS_NEXT[prev][k])
        prev = k
    return total / n if n else 0.0


def _random_candidates(text: str) -> list[str]:
    """The words of ``text`` and, of a word with '=' in it (``--token=...``, ``KEY=...``), what follows the first one."""
    words = [w for w in RANDOM_SPLIT.split(text) if len(w) >= 20]
    return words + [w.split("=", 1)[1] for w in words if "=" in w.rstrip("=")]


def random_word(word: str) -> bool:
    """A word of 20 characters or more that mixes lower case, upper case and digits (any symbols with them), nearly
    as varied as it can be for its length and whose classes follow each other at random: a generated key or secret
    (``k3J.Xz-9q@R[tY]w0:pL8sV2nB6mC4dF1``), not a name, path, URL or version (``Qwen/Qwen2.5-7B-Instruct-AWQ:v12``)."""
    n = len(word)
    if n < 20 or not _classes(word) or REPEAT.search(word):
        return False
    return entropy(word) >= math.log2(n) - 1.3 and class_surprise(word) * n >= max(MIN_SURPRISE * n, MIN_SURPRISE_TOTAL)


def _decoded_json_key(token: str) -> bool:
    """A base64 (or base64url) blob that decodes to service-account / credential JSON."""
    if len(token) < 40:
        return False
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            text = decode(token + "=" * (-len(token) % 4)).decode("utf-8", "strict")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if re.search(r"\"(?:type|private_key|client_secret|refresh_token|auths?|identitytoken|password)\"\s*:", text):
            return True
    return False


def _classes(text: str) -> bool:
    return bool(re.search(r"[A-Z]", text) and re.search(r"[a-z]", text) and re.search(r"[0-9]", text))


def _legacy_azure(word: str) -> bool:
    """A whole word in one of the legacy Azure client-secret formats: mixed letters and digits, a symbol, random
    (names such as ``meta-llama/Meta-Llama-3-8B-Instr`` have long lowercase words and less entropy)."""
    if not any(p.fullmatch(word) for p in LEGACY_AZURE) or word.isalnum() or not _classes(word) or word.count("/") > 3:
        return False
    e = entropy(word)
    return e >= 4.2 and not (re.search(r"[a-z]{6,}|[A-Z]{6,}", word) and e < 4.5) and class_surprise(word) >= MIN_SURPRISE


def _aws_secret_in_path(url: str) -> tuple[int, int] | None:
    """(start, end) of a 40-character AWS secret access key that fills one or more whole path segments of
    ``url`` (``s3://bucket/<key with its own slashes>/data``): the AWS pattern cannot see it there, since a
    key may itself contain '/'. Folder names (words, many slashes, little entropy) are not keys."""
    head = url.find("://")
    start = url.find("/", head + 3) if head >= 0 else -1
    if start < 0:
        return None
    bounds = [i for i, c in enumerate(url) if c == "/" and i >= start]
    end_of_path = len(re.split(r"[?#]", url, maxsplit=1)[0])
    for i in bounds:
        j = i + 1 + 40
        if j <= end_of_path and (j == end_of_path or url[j] in "/?#"):
            cand = url[i + 1:j]
            if (re.fullmatch(r"[A-Za-z0-9/+]{40}", cand) and not cand.startswith("/") and _classes(cand)
                    and cand.count("/") <= 3):
                e = entropy(cand)
                if (e >= 4.4 and not (re.search(r"[a-z]{6,}", cand) and e < 4.6) and class_surprise(cand) >= NAME_SURPRISE
                        and not REPEAT.search(cand)):
                    return i + 1, j
    return None


def find_secret(text: str, *, guess: bool = True) -> str | None:
    """What ``text`` looks like when it carries a credential; None when it does not. ``guess=False`` keeps
    to unambiguous formats (no 40-hex, no entropy test): for files that hold digests and commit ids."""
    if not text or text.startswith("secret://"):
        return None
    for pattern, what in PATTERNS:
        if what == AWS_SECRET_WHAT:  # 40 characters with no prefix: a CamelCase path has them too
            if any(class_surprise(m) >= NAME_SURPRISE and not REPEAT.search(m) for m in pattern.findall(text)):
                return what
        elif pattern.search(text):
            return what
    if guess and HEX40.search(text):
        return HEX40_WHAT
    if guess and HEX64.search(text):
        return HEX64_WHAT
    if guess and any(_legacy_azure(w) for w in WORD_SPLIT.split(text) if len(w) in (32, 34)):
        return LEGACY_AZURE_WHAT
    if guess and any(random_word(w) for w in _random_candidates(text)):
        return RANDOM_WHAT
    if USERINFO.search(text):
        return "a URL with a user name and password (or token) in it"
    for url in URL.findall(text):
        m = SIGNED_PARAM.search(url)
        if m:
            return f"a signed or credential-carrying URL (query parameter {m.group(1)})"
        if _aws_secret_in_path(url):
            return f"{AWS_SECRET_WHAT} (in the URL's path)"
    if not guess:
        return None
    for m in TOKEN.finditer(text):
        token = m.group(0)
        if HASH_PREFIX.search(text[max(0, m.start() - 7):m.start()]):
            continue  # --hash=sha256:... in a lock file: a digest, not a key
        if _decoded_json_key(token):
            return "a base64-encoded credential file (service-account or registry JSON)"
        if _random_token(token):
            return "a high-entropy string (a key or token)"
    return None


#: A credential handed over as NAME=VALUE outside a URL (``azcopy --sas sig=...``, ``token=...`` in a command line).
CREDENTIAL_PARAM = re.compile(r"(?i)\b((?:sig|token|signature|password|sas)=)[^\s&'\"#]+")


def redact(text: str) -> str:
    """``text`` with every credential found by ``find_secret``'s rules, URL userinfo, URL query string and
    CREDENTIAL_PARAM value replaced by ``***`` (for messages, logs and reports). 40- and 64-hex strings stay: in a
    message they are commit ids, digests and profile hashes far more often than keys (``find_secret`` still rejects
    them as input values). The one redactor: the payload ships this module to the VM (agent/bundle.py), where the
    helper's console filter runs it (Python >= 3.8, stdlib only)."""
    text = CREDENTIAL_PARAM.sub(lambda m: m.group(1) + "***", text)
    text = USERINFO.sub(lambda m: f"{m.group(1)}***@", text)

    def url(m: re.Match[str]) -> str:
        u = m.group(0).split("?", 1)[0]
        while (key := _aws_secret_in_path(u)) is not None:
            u = u[:key[0]] + "***" + u[key[1]:]
        return u + ("?***" if "?" in m.group(0) else "")

    text = URL.sub(url, text)
    words = [w for w in WORD_SPLIT.split(text) if len(w) in (32, 34) and _legacy_azure(w)]
    words += sorted((w for w in _random_candidates(text) if random_word(w)), key=len)  # KEY=token: only the token
    for w in words:
        text = text.replace(w, "***")
    def aws_key(m: re.Match[str]) -> str:  # 40 characters of a CamelCase path stay (find_secret)
        return "***" if class_surprise(m.group(0)) >= NAME_SURPRISE and not REPEAT.search(m.group(0)) else m.group(0)

    for pattern, what in PATTERNS:
        text = pattern.sub(aws_key if what == AWS_SECRET_WHAT else "***", text)

    def token(m: re.Match[str]) -> str:
        t = m.group(0)
        if HASH_PREFIX.search(text[max(0, m.start() - 7):m.start()]):
            return t
        return "***" if _random_token(t) or _decoded_json_key(t) else t

    return TOKEN.sub(token, text)
