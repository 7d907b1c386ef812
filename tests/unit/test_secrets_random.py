"""Generated keys and secrets are found by their shape (provisioner.secrets.random_word: class mix, length, entropy and
how the character classes follow each other) whatever their symbols, while realistic settings built from names,
words, versions and paths pass. Properties checked with hypothesis."""

from __future__ import annotations

import json
import random
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.secrets import find_secret

# The alphabets keys and secrets are drawn from: base64 and base64url, URL-unreserved, the legacy Azure AD client
# secrets (letters, digits and .=-:[_@/*]+?), password generators' symbols.
ALPHABETS = (string.ascii_letters + string.digits + "+/", string.ascii_letters + string.digits + "-_",
             string.ascii_letters + string.digits + "._~-", string.ascii_letters + string.digits + ".=-:[]_@/*+?",
             string.ascii_letters + string.digits + ".-@[]:", string.ascii_letters + string.digits + "!#$%&*()+?")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**64), alphabet=st.sampled_from(ALPHABETS), length=st.integers(32, 64))
def test_random_tokens_are_found(seed, alphabet, length):
    """Nearly every generated token is found; one may by chance lack a digit or a case, or run on in one class
    (measured over these alphabets: about 1 in 90 missed at 33 characters, 1 in 1,300 at 64); of 200, at least 95 %."""
    rng = random.Random(seed)
    tokens = ["".join(rng.choice(alphabet) for _ in range(length)) for _ in range(200)]
    found = [t for t in tokens if find_secret(t)]
    assert len(found) >= 190, [t for t in tokens if t not in found][:5]
    assert all(find_secret(f"SECRET={t}") for t in found[:20])


ORGS = ("meta-llama", "mistralai", "Qwen", "google", "microsoft", "EleutherAI", "TheBloke", "BAAI", "tiiuae",
        "stabilityai", "deepseek-ai", "HuggingFaceH4", "NousResearch", "allenai", "nvidia", "facebook")
WORDS = ("llama", "mistral", "qwen", "gemma", "phi", "falcon", "bert", "roberta", "mixtral", "instruct", "chat",
         "base", "large", "small", "xl", "awq", "gptq", "fp16", "bf16", "int8", "sft", "dpo", "coder", "vision",
         "train", "eval", "data", "datasets", "shards", "checkpoints", "models", "runs", "cache", "imagenet", "wikitext",
         "tokenizer", "weights", "lora", "merged", "final", "step", "epoch", "stable", "diffusion", "whisper")
word = st.tuples(st.sampled_from(WORDS), st.sampled_from((str.lower, str.capitalize, str.upper))).map(lambda t: t[1](t[0]))
number = st.one_of(st.integers(0, 99999).map(str), st.tuples(st.integers(0, 12), st.integers(0, 9)).map(lambda t: f"{t[0]}.{t[1]}"))
size = st.sampled_from(("7B", "8B", "13B", "70B", "1.5B", "0.5B", "8x7B", "125M", "350m", "3b"))
version = st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 200)).map(lambda t: "%d.%d.%d" % t)
model = st.builds(lambda org, head, sz, rest, v: f"{org}/" + "-".join([head.capitalize(), sz, *rest] + ([f"v{v}"] if v else [])),
                  st.sampled_from(ORGS), word, size, st.lists(word, max_size=3), st.one_of(st.none(), number))
segment = st.one_of(word, st.builds(lambda a, b: a + b, word, number), st.builds(lambda a, b: f"{a}_{b}", word, word),
                    st.builds(lambda a, b: a.capitalize() + b.capitalize(), word, word),
                    st.tuples(st.integers(0, 99999), st.integers(1, 99999)).map(lambda t: "part-%05d-of-%05d" % t))
path = st.builds(lambda root, segs: root + "/".join(segs),
                 st.sampled_from(("/mnt/data/", "/home/ubuntu/", "/opt/", "s3://my-bucket/", "gs://corpus/", "az://acct/c/")),
                 st.lists(segment, min_size=1, max_size=6))
host = st.sampled_from(("download.pytorch.org", "huggingface.co", "pypi.org", "storage.googleapis.com", "nvcr.io",
                        "acct.blob.core.windows.net", "10.0.0.12", "node-01.cluster.local"))
url = st.builds(lambda h, segs: f"https://{h}/" + "/".join(segs), host, st.lists(segment, min_size=1, max_size=5))
image = st.builds(lambda h, a, b, y, m: f"{h}/{a}/{b}:{y}.{m:02d}-py3", host, word, word, st.integers(20, 26), st.integers(1, 12))
pin = st.builds(lambda w, v, c: f"{w.lower()}=={v}+cu12{c}", word, version, st.integers(0, 6))
setting = st.sampled_from((":4096:8", ":16:8", "expandable_segments:True", "max_split_size_mb:512", "^lo,docker0",
                           "mlx5_0:1,mlx5_1:1", "INFO", "WARN"))
scalar = st.one_of(model, path, url, image, pin, version, setting, word, number)
ordinary = st.one_of(scalar, st.lists(scalar, min_size=2, max_size=4).map(",".join),
                     st.dictionaries(word, st.one_of(scalar, st.integers(0, 4096), st.booleans()), min_size=1, max_size=3).map(json.dumps))


@settings(max_examples=300, deadline=None)
@given(ordinary)
def test_realistic_settings_pass(value):
    assert find_secret(value) is None
