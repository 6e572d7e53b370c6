"""The premises pfx's rule leans on in vLLM, for the configuration vLLM serves (docs/engines.md,
"Premises belong to a configuration").

Two facts about how vLLM computes decide what the plugin may take from its prefix cache and what it
vouches for: whether a request's answer is independent of what is batched beside it, and whether a
prefill step of one token computes as a longer one (else the rule's prefill-step premise, INV-12,
keeps resumes that end with a one-token step where the cold run's does not). Both are facts about one
configuration: vLLM's version, the platform and its CPU's instruction sets, the dtype, the kernel
settings, the block size, the model. A fact measured in float32 says nothing of bfloat16. So the
plugin takes them from one of three places, and serves nothing on a guess:

- pfx's batch-invariant kernels on vLLM's CPU build (the plugin's default): every linear layer in
  calls of a fixed row count (``pfx.integrations.vllm.linear``), the attention without its KV split
  (each query row over its own request's KV in one pass), norms and activations per row. Each row's
  bits then depend on its own inputs alone, whatever the step's row count: batch invariant, and no
  prefill-step premise. Measured in float32 and bfloat16 by the vLLM suites, and by conform for a
  user's own model.
- vLLM's own kernels (``PFX_VLLM_BATCH_INVARIANT=0``) in float32 on the CPU build: a row depends on
  the step's row count only through a step of one row (oneDNN's one-row path), which the
  prefill-step premise models; measured by the suites ``vllm.kind_*``. A guarantee for a request
  served alone.
- a certificate (``PFX_VLLM_CERTIFICATE=FILE``) that ``python -m pfx.integrations.vllm.conform ...
  --certify FILE`` wrote on the very configuration served: the grid, the step premise and the
  batching finding conform proved there. A certificate for another configuration is refused, naming
  what differs.

Anything else (vLLM's own kernels in bfloat16 or float16, where a row's bits depend on the step's row
count beyond a one-row step and no rule keeps a resume exact; a platform other than the CPU build) is
refused at start by name, with what to do.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
from typing import Optional

from . import linear

CERTIFICATE_VARIABLE = "PFX_VLLM_CERTIFICATE"
CERTIFICATE_FORMAT = "pfx vLLM certificate 1"
CPU_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "asimd", "bf16", "sve")
"""The CPU features that choose vLLM's, oneDNN's and torch's CPU kernels, as /proc/cpuinfo names them."""
ONEDNN_ISA_VARIABLE = "ONEDNN_MAX_CPU_ISA"  # caps the instruction sets oneDNN uses: a kernel setting
DECODE_ROWS_RESUMES = 200
"""The fewest resumes from rows decode wrote, every one equal to its cold run, from which a certificate
says decode rows are exact (conform --certify makes 200: conform.DECODE_EVIDENCE)."""
DECODE_ROWS_RESCORED = 100
"""The fewest logprobs decode computed, each equal bit for bit to a cold prefill's rescoring of the same
tokens, from which a certificate says decode rows are exact (conform --certify rescores its 20 prompts'
decoded runs, 2 blocks less one logprob each: 1260 at block 32, 5100 at block 128)."""
DECODE_ROWS_KV_BLOCKS = 40
"""The fewest blocks of K and V rows holding a row decode wrote, each byte-equal to a cold prefill's of the
same tokens, from which a certificate says decode rows are exact (conform --certify compares every whole
block of its 20 prompts' decoded runs that decode wrote into: 2 a prompt and layer, 80 for a two-layer
model)."""
DECODE_ROWS_BATCH_SIZES = tuple(range(2, 9))
"""The batch sizes of resumes from rows decode wrote a certificate needs besides resumes served alone and
resumes joining another mid-decode: each resume beside 1 to 7 others (conform.DECODE_EVIDENCE serves them)."""


class Unproven(RuntimeError):
    """No premise is known for the configuration served: the plugin refuses it (its pfx.Refused names why)."""


@dataclasses.dataclass(frozen=True)
class Premises:
    """What the rule may lean on: ``batch_invariant`` (a request's answer is independent of its batch:
    the guarantee holds under load, else for a request served alone), ``one_token_step_alone`` (a
    prefill step of one token computes otherwise than a longer one: the rule keeps the prefill-step
    premise), ``grids`` (the chunks proved exact; None: every multiple of the block size),
    ``decode_rows_exact`` (a row decode wrote equals the row a prefill of the same tokens writes: the
    rule may reuse it, ``Config.decode_rows_exact``; only ever from a certificate) and where they come
    from (``source``, said at start)."""
    batch_invariant: bool
    one_token_step_alone: bool
    source: str
    grids: Optional[tuple] = None
    decode_rows_exact: bool = False


# ------------------------------------------------------------------------------ the configuration

def cpu_features() -> list:
    """The CPU features among CPU_FLAGS this machine has (/proc/cpuinfo's first flags line)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return [flag for flag in CPU_FLAGS if flag in have]
    except OSError:
        pass
    return []


def model_identity(model: str) -> dict:
    """What names a model's weights: its directory's config.json (sha256) and its weight files (names and
    sizes, hashed: reading gigabytes of weights at every start would cost minutes), wherever the
    directory lies; a name that is not a directory stands for itself."""
    if not os.path.isdir(model):
        return {"model": model}
    identity = {}
    if True:
        config = os.path.join(model, "config.json")
        if os.path.isfile(config):
            with open(config, "rb") as file:
                identity["config_sha256"] = hashlib.sha256(file.read()).hexdigest()
        weights = hashlib.sha256()
        for name in sorted(os.listdir(model)):
            if name.endswith((".safetensors", ".bin", ".pt", ".gguf")):
                weights.update(f"{name}:{os.path.getsize(os.path.join(model, name))}\n".encode())
        identity["weights_sha256"] = weights.hexdigest()
    return identity


def configuration(vllm_config, batch_invariant: bool) -> dict:
    """The configuration a premise belongs to, as served by `vllm_config` with pfx's batch-invariant
    kernels on or off: what a certificate names, and what the plugin compares it with."""
    import torch
    import vllm
    from vllm.platforms import current_platform
    model = vllm_config.model_config
    scheduler = vllm_config.scheduler_config
    on_cpu = current_platform.is_cpu()
    kernels = {"pfx batch invariant": bool(batch_invariant),
               "linear rows": linear.ROWS if batch_invariant and on_cpu else None,
               "attention": "per token" if batch_invariant and on_cpu else None,
               "VLLM_CPU_ATTN_SPLIT_KV": os.environ.get("VLLM_CPU_ATTN_SPLIT_KV", "1") if on_cpu else None,
               ONEDNN_ISA_VARIABLE: os.environ.get(ONEDNN_ISA_VARIABLE),
               "threads": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto"),
               "chunked prefill": bool(scheduler.enable_chunked_prefill),
               "max_num_batched_tokens": scheduler.max_num_batched_tokens,
               "max_num_scheduled_tokens": scheduler.max_num_scheduled_tokens}
    return {"engine": "vLLM", "engine version": vllm.__version__, "torch": torch.__version__,
            "platform": str(getattr(current_platform, "device_name", "") or current_platform._enum.name.lower()),
            "machine": platform.machine(), "cpu features": cpu_features(),
            "dtype": str(model.dtype).removeprefix("torch."), "block size": vllm_config.cache_config.block_size,
            "kernels": kernels, "model": model_identity(model.model)}


def _describe(configuration: dict) -> str:
    return (f"vLLM {configuration['engine version']} on {configuration['platform']}, "
            f"{configuration['dtype']}, block {configuration['block size']}")


# ------------------------------------------------------------------------------ the certificate

def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def decode_rows_unproved(decode_rows: Optional[dict]) -> list:
    """What the decode rows' finding of a report lacks for a certificate to say decode rows are exact, in
    words (none: it proves them): DECODE_ROWS_RESUMES resumes, none differing, served alone, in batches
    of every size of DECODE_ROWS_BATCH_SIZES and joining another mid-decode, for a row decode wrote
    must equal a prefill's however the request that reads it is served; DECODE_ROWS_RESCORED logprobs
    decode computed, each equal bit for bit to a prefill's rescoring of the same tokens; and
    DECODE_ROWS_KV_BLOCKS blocks of K and V rows decode wrote, each byte-equal to a cold prefill's."""
    decode_rows = decode_rows or {}
    resumes = decode_rows.get("resumes", 0)
    lacking = []
    if resumes < DECODE_ROWS_RESUMES:
        lacking.append(f"{resumes} resumes from rows decode wrote, fewer than {DECODE_ROWS_RESUMES}")
    if decode_rows.get("mismatch") is not None:
        lacking.append("a resume from rows decode wrote differed from its cold run")
    for kind, words in (("alone", "served alone"), ("batched", "batched with other requests"),
                        ("joining", "joining another request mid-decode")):
        if not decode_rows.get(kind, 0):
            lacking.append(f"no resume {words}")
    missing = [size for size in DECODE_ROWS_BATCH_SIZES if size not in decode_rows.get("batch_sizes", [])]
    if missing and decode_rows.get("batched", 0):
        lacking.append(f"no batch of {', '.join(map(str, missing))} resumes")
    rescored, differs = decode_rows.get("rescored", 0), decode_rows.get("rescoring_differs", 0)
    if rescored < DECODE_ROWS_RESCORED:
        lacking.append(f"{rescored} decode logprobs compared with a prefill's rescoring, fewer than "
                       f"{DECODE_ROWS_RESCORED}")
    if differs:
        lacking.append(f"{differs} decode logprobs differed from a prefill's rescoring of the same tokens")
    blocks, differ = decode_rows.get("kv_blocks", 0), decode_rows.get("kv_blocks_differ", 0)
    if blocks < DECODE_ROWS_KV_BLOCKS:
        lacking.append(f"{blocks} blocks of K and V rows decode wrote compared byte for byte with a prefill's, "
                       f"fewer than {DECODE_ROWS_KV_BLOCKS}")
    if differ:
        lacking.append(f"{differ} blocks of K and V rows decode wrote differed from a prefill's, byte for byte")
    return lacking


def certificate(configuration: dict, report: dict, prefill_step: int) -> dict:
    """What conform proved on `configuration` (its report, pfx conform's JSON; the step premise it
    judged under): a certificate, sealed by a digest of the rest, so that a fact edited by hand no
    longer matches it. A grid counts as proved only where conform resumed on it, and a finding only
    where conform compared something: nothing is proved by a check that compared nothing. Decode rows
    are exact only after DECODE_ROWS_RESUMES resumes from them, none of which differed, served alone,
    batched and joining (decode_rows_unproved())."""
    grids = sorted(g["grid"] for g in report.get("grids", []) if g.get("exact") and g.get("resumes", 0) > 0)
    batching = report.get("batching") or {}
    body = {"format": CERTIFICATE_FORMAT, "configuration": configuration,
            "proved": {"verdict": report.get("verdict"), "exact grids": grids,
                       "one-token prefill steps computed alone": prefill_step != 0,
                       "batch invariant": batching.get("batches", 0) > 0 and bool(batching.get("independent")),
                       "decode rows equal": not decode_rows_unproved(report.get("decode_rows"))},
            "report": report}
    return dict(body, digest=_digest(body))


def read_certificate(path: str) -> dict:
    """The certificate at `path`; Unproven naming what is wrong with it (unreadable, not a certificate,
    edited after conform wrote it)."""
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, ValueError) as error:
        raise Unproven(f"{CERTIFICATE_VARIABLE}={path}: cannot read a certificate there ({error})") from None
    if not isinstance(document, dict) or document.get("format") != CERTIFICATE_FORMAT:
        raise Unproven(f"{CERTIFICATE_VARIABLE}={path} is not a certificate pfx's vLLM conform wrote (its format "
                       f"is not \"{CERTIFICATE_FORMAT}\")")
    body = {key: value for key, value in document.items() if key != "digest"}
    if document.get("digest") != _digest(body):
        raise Unproven(f"{CERTIFICATE_VARIABLE}={path} was changed after conform wrote it (its digest does not "
                       f"match what it says): certify the configuration again")
    return document


def differences(certified: dict, served: dict, where: str = "") -> list:
    """Each field in which the certified configuration and the served one differ, named with both values."""
    found = []
    for key in sorted(set(certified) | set(served)):
        a, b = certified.get(key), served.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += differences(a, b, f"{where}{key}: ")
        elif a != b:
            found.append(f"{where}{key} {json.dumps(a)} certified, {json.dumps(b)} served")
    return found


def from_certificate(path: str, served: dict, chunk: int) -> Premises:
    """The premises a certificate proves for the configuration served, with the rule's `chunk`; Unproven
    where it does not cover them."""
    document = read_certificate(path)
    mismatch = differences(document["configuration"], served)
    if mismatch:
        raise Unproven(f"{CERTIFICATE_VARIABLE}={path} certifies another configuration than the one served: "
                       + "; ".join(mismatch))
    proved = document["proved"]
    derived = certificate(document["configuration"], document["report"], 0)["proved"]
    for fact in ("verdict", "exact grids", "batch invariant", "decode rows equal"):
        if proved.get(fact) != derived[fact]:  # a fact edited by hand, the digest sealed again
            raise Unproven(f"{CERTIFICATE_VARIABLE}={path} says {fact} {json.dumps(proved.get(fact))}, which its own "
                           f"report does not show ({json.dumps(derived[fact])}): certify the configuration again")
    if proved["verdict"] != "safe":
        raise Unproven(f"{CERTIFICATE_VARIABLE}={path} proves no exact grid (conform's verdict: {proved['verdict']})")
    if chunk not in proved["exact grids"]:
        raise Unproven(f"{CERTIFICATE_VARIABLE}={path} proves the grids {proved['exact grids']} exact, not the "
                       f"rule's chunk {chunk}: set PFX_VLLM_CHUNK to one of them")
    return Premises(batch_invariant=proved["batch invariant"],
                    one_token_step_alone=proved["one-token prefill steps computed alone"],
                    source=f"the certificate {path}", grids=tuple(proved["exact grids"]),
                    decode_rows_exact=proved["decode rows equal"])


# ------------------------------------------------------------------------------ the decision

def decide(vllm_config, batch_invariant: bool, chunk: int, environ=None) -> Premises:
    """The premises of the configuration `vllm_config` serves: from a certificate where
    PFX_VLLM_CERTIFICATE names one, else from what was measured of it (the module's text); Unproven
    naming the configuration and what to do where nothing was."""
    from vllm.platforms import current_platform
    environ = os.environ if environ is None else environ
    served = configuration(vllm_config, batch_invariant)
    path = environ.get(CERTIFICATE_VARIABLE)
    if path:
        return from_certificate(path, served, chunk)
    measure = (f"measure it with python -m pfx.integrations.vllm.conform MODEL --dtype {served['dtype']} "
               f"--block-size {served['block size']}{'' if batch_invariant else ' --vllm-kernels'} --certify FILE "
               f"and give {CERTIFICATE_VARIABLE}=FILE")
    if not current_platform.is_cpu():
        raise Unproven(f"{_describe(served)}: pfx measured no premise of vLLM on this platform: {measure}")
    if batch_invariant:
        if not linear.installed():  # the premise is these kernels': never vouched for without them
            raise Unproven(f"{_describe(served)}: pfx's batch-invariant linear layers are not installed in this "
                           f"process (pfx's plugin did not load in it), so its rows would depend on their step")
        return Premises(batch_invariant=True, one_token_step_alone=False,
                        source="pfx's batch-invariant kernels (every linear layer in calls of "
                               f"{served['kernels']['linear rows']} rows, the attention's KV split off)")
    if served["dtype"] == "float32":
        return Premises(batch_invariant=False, one_token_step_alone=True,
                        source="vLLM's own kernels in float32, where only a one-row step computes otherwise")
    raise Unproven(f"{_describe(served)}: with vLLM's own kernels (PFX_VLLM_BATCH_INVARIANT=0) a row's bits in "
                   f"{served['dtype']} depend on how many rows its step computes, beyond a one-row step, so no "
                   f"grid or step keeps a resume exact: unset PFX_VLLM_BATCH_INVARIANT for pfx's batch-invariant "
                   f"kernels, or {measure}")
