"""The capacity plan: what the user wants, read from the stack's `llmfleet:plan` config.

Every model is `data.Data` (`extra="forbid"`, frozen) so a typo is an error, not a default.
Per region inputs are in `regions`, the traffic in `traffic`, the routing and DNS policy in
`routing`, the cluster's access and start-up in `cluster`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmfleet.catalog import model_facts
from llmfleet.catalog.kubernetes import SupportType, default_kubernetes_version
from llmfleet.data import Data
from llmfleet.errors import LlmfleetError
from llmfleet.perf.architecture import KvCacheDtype, Precision
from llmfleet.perf.prefix_cache import (
    HEADROOM_DEFAULT,
)
from llmfleet.plan.alerting import Alerting
from llmfleet.plan.cluster import ClusterAccess, Startup
from llmfleet.plan.edge import Edge
from llmfleet.plan.regions import Region
from llmfleet.plan.routing import ApiKey, Dns, Rollout, Routing
from llmfleet.plan.traffic import DayProfile, Traffic


class ModelSpec(Data):
    id: str | None = Field(
        default=None, description="Catalog id or alias, e.g. Llama-3.1-8B-Instruct."
    )
    config_path: str | None = Field(
        default=None, description="Path to a Hugging Face config.json, relative to the repo root."
    )
    hf_repo: str | None = Field(
        default=None,
        description="Checkpoint vLLM loads; defaults to the catalog model's repository.",
    )
    precision: Precision = Field(
        default="bf16",
        description="Pins the serving precision of the weights when given (the search then "
        "tries only it); when left out the search tries allowed.precisions.",
    )
    kv_cache_dtype: KvCacheDtype = Field(
        default="auto",
        description="Pins the KV cache dtype when given (auto keeps 16-bit KV; fp8 halves "
        "it); when left out the search tries allowed.kv_cache_dtypes.",
    )
    enforce_eager: bool = Field(
        default=False, description="vLLM without CUDA graphs: slower small-batch decode."
    )

    @property
    def pins_precision(self) -> bool:
        return "precision" in self.model_fields_set

    @property
    def pins_kv_cache_dtype(self) -> bool:
        return "kv_cache_dtype" in self.model_fields_set
    revision: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{40}$",
        description="The checkpoint's commit (40 hex digits) vLLM loads (`--revision`), so a "
        "re-pushed branch cannot change what is served; absent: the repository's main branch.",
    )
    previous_revision: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{40}$",
        description="While a rollout moves the fleet to a new `revision`: the commit the "
        "running pods still serve. The serving pods may then read both revisions' prefixes "
        "(a pod that restarts mid-rollout keeps its weights); remove it once every region "
        "runs the new revision (docs/day2.md).",
    )

    @field_validator("precision", "kv_cache_dtype", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        """BF16 and bf16 are the same precision, as H100 and h100 are the same GPU."""
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        if (self.id is None) == (self.config_path is None):
            raise ValueError("give exactly one of model.id (a catalog model) or model.config_path")
        if self.previous_revision is not None and self.previous_revision == self.revision:
            raise ValueError(
                "model.previous_revision is model.revision: it names the revision the running "
                "pods serve while the fleet moves to another; remove it, or set revision to "
                "the new commit"
            )
        if self.previous_revision is not None and self.revision is None:
            raise ValueError(
                "model.previous_revision needs model.revision, the commit the fleet moves to"
            )
        return self


class Slo(Data):
    ttft_ms: float = Field(
        gt=0,
        description="Time to first token at the percentile of every request: request "
        "handling, the waits for the prefill lane and a slot, and the prompt's own chunked "
        "prefill, over every prompt length (a prompt over max_model_len counts against it).",
    )
    itl_ms: float = Field(gt=0, description="Inter-token latency target (see `itl`).")
    itl: Literal["token_gap", "tpot"] = Field(
        default="token_gap",
        description="token_gap: every gap between two tokens of a stream, at the percentile "
        "(vLLM's benchmark `itl`; the seed's 'ms per token'); tpot: a request's mean time per "
        "output token at the percentile across requests (vLLM's `tpot`), a looser target.",
    )
    percentile: float = Field(
        default=99, gt=50, lt=100, description="Percentile both targets hold at."
    )
    max_stall_ms: float | None = Field(
        default=None,
        gt=0,
        description="The longest gap between two tokens of a stream the plan allows: a step "
        "carrying a prompt chunk stalls every running stream for its length. `itl_ms` holds "
        "the gaps at the percentile; this bounds the rest. Default: 5 x itl_ms (STALL_ITLS).",
    )

    @property
    def stall_ms(self) -> float:
        """The longest stall allowed: `max_stall_ms`, or STALL_ITLS x itl_ms when not given."""
        return self.max_stall_ms if self.max_stall_ms is not None else STALL_ITLS * self.itl_ms

    @model_validator(mode="after")
    def _stall_above_itl(self) -> Slo:
        if self.max_stall_ms is not None and self.max_stall_ms < self.itl_ms:
            raise ValueError(
                f"slo.max_stall_ms ({self.max_stall_ms:g}) is below slo.itl_ms "
                f"({self.itl_ms:g}): the longest stall cannot be shorter than the gap at the "
                f"percentile; give max_stall_ms >= {self.itl_ms:g} or leave it out "
                f"(default {STALL_ITLS} x itl_ms)"
            )
        return self


STALL_ITLS = 5
"""The longest stall a plan allows by default, in ITL targets: a step carrying a prompt chunk
may stall the streams for up to five token gaps (200 ms at a 40 ms target), about one token
at a reader's pace; longer chunks would make multi-second pauses at a relaxed percentile."""


SpeculativeMethod = Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"]


class SpeculativeSpec(Data):
    """One speculative-decoding setup the search may try (beside none)."""

    method: SpeculativeMethod = Field(description="vLLM speculative-config method.")
    num_speculative_tokens: int | None = Field(
        default=None, ge=1, le=10, description="Tokens drafted per step (k); default 3."
    )
    acceptance_rate: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Probability that each drafted token is accepted; defaults per method and "
        "model in catalog/levers/speculative.json (ngram and draft_model have none).",
    )
    draft_model: str | None = Field(
        default=None,
        description="eagle/eagle3: the head's Hugging Face repo (default per model); "
        "draft_model: a catalog model id with the target's tokenizer.",
    )


class Allowed(Data):
    instance_types: list[str] | None = Field(default=None, description="Only these instance types.")
    gpus: list[str] | None = Field(default=None, description="Only instances with these GPUs.")
    precisions: list[Precision] | None = Field(
        default=None,
        min_length=1,
        description="Weight precisions the search tries. Default: the model's native "
        "precision plus fp8 where the catalog lists a published FP8 checkpoint; int4 only "
        "when listed here (it needs a pre-quantized checkpoint).",
    )
    kv_cache_dtypes: list[KvCacheDtype] | None = Field(
        default=None,
        min_length=1,
        description="KV cache dtypes the search tries. Default: auto and fp8 (fp8 only on "
        "GPUs with FP8 support).",
    )
    speculative: list[SpeculativeSpec] = Field(
        default_factory=list,
        description="Speculative decoding setups the search tries besides none (default: "
        "none, as acceptance depends on the workload).",
    )
    multi_node: bool = Field(
        default=True,
        description="Replicas that span nodes (pipeline or tensor parallelism, or expert "
        "parallelism, across nodes over EFA with GPUDirect RDMA) where the instance type "
        "allows them; false keeps every replica inside one node.",
    )
    disaggregated: bool = Field(
        default=True,
        description="Price disaggregated serving (a prefill pool and a decode pool, the KV "
        "moved between them over EFA) beside aggregated serving, and choose it when cheaper.",
    )


class PriceOverride(Data):
    instance_type: str = Field(
        description="A catalog instance type offered in the plan's region(s)."
    )
    usd_per_hour: float = Field(
        gt=0, description="The price per instance-hour that replaces the on-demand list price."
    )
    region: str | None = Field(default=None, description="One region, or every region if absent.")


class CapacityPlan(Data):
    name: str = Field(
        min_length=1,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="DNS-safe name of the service; prefixes every resource.",
    )
    model: ModelSpec = Field(
        description="What is served: a catalog model (`id`) or a Hugging Face config.json "
        "(`config_path` with `hf_repo`); exactly one of the two."
    )
    max_model_len: int = Field(gt=0, description="Longest prompt + output a request may have.")
    traffic: Traffic = Field(description="Fleet-wide request rates and token lengths.")
    slo: Slo = Field(description="The latency targets at a percentile.")
    regions: list[Region] = Field(
        min_length=1,
        description="Where the fleet runs; traffic shares sum to 1.0. An environment with "
        "several deploys as a stack per region plus a global one (docs/deploy.md).",
    )
    allowed: Allowed = Field(
        default_factory=Allowed,
        description="What the search may choose: instances, GPUs, precisions, KV dtypes, "
        "speculative methods, replicas across nodes, disaggregated pools.",
    )
    headroom: float = Field(
        default=HEADROOM_DEFAULT,
        ge=0,
        lt=0.9,
        description="Share of capacity kept free for spikes (seed: 20-25 %).",
    )
    gpu_memory_utilization: float = Field(
        default=0.90, gt=0.1, le=0.98,
        description="vLLM's fraction of GPU memory (`--gpu-memory-utilization`): weights, "
        "activations and the KV pool live inside it.",
    )
    prices: list[PriceOverride] = Field(
        default_factory=list,
        description="Overrides of the on-demand list price (a negotiated or reserved rate).",
    )
    confidence: Literal["expected", "pessimistic"] = Field(
        default="expected",
        description="pessimistic sizes with the GPU part of every step at the p90 of the "
        "calibration's measured/predicted ITL ratio",
    )
    cluster: ClusterAccess = Field(
        default_factory=ClusterAccess,
        description="The EKS API's reach, who administers the clusters, NAT and upgrades.",
    )
    kubernetes_version: str = Field(
        default_factory=default_kubernetes_version,
        pattern=r"^1\.\d+$",
        description="EKS version; default: the newest in standard support (with 90 days "
        "left on the catalog's date) that every pinned chart supports.",
    )
    kubernetes_support: SupportType = Field(
        default="standard",
        description="standard: refuse a version near or past the end of EKS standard "
        "support (EKS upgrades it at that end); extended: run it into extended support, "
        "billed at $0.60 per cluster-hour instead of $0.10.",
    )
    environment: Literal["development", "production"] = Field(
        default="development",
        description="production refuses an EKS API endpoint open to 0.0.0.0/0, a public "
        "entry point without edge.auth and edge.rate_limit, an unpinned model.revision, no "
        "account_id and no alert receiver; it tags every AWS resource "
        "`llmfleet.io/environment`, which the policy pack reads.",
    )
    account_id: str | None = Field(
        default=None,
        pattern=r"^[0-9]{12}$",
        description="The AWS account the fleet deploys into: S3 bucket names are global, so "
        "every bucket name carries it; the program refuses credentials of another account. "
        "Required in production.",
    )
    routing: Routing = Field(
        default_factory=Routing,
        description="How users reach regions and which region losses the fleet survives.",
    )
    rollout: Rollout = Field(
        default_factory=Rollout,
        description="The order region stacks deploy in, canary first (`llmfleet rollout`).",
    )
    dns: Dns | None = Field(
        default=None,
        description="The global name; with it every region gets a TLS entry point, a "
        "Route53 health check and a routed record.",
    )
    api_key: ApiKey | None = Field(default=None, description="Require an API key (vLLM).")
    edge: Edge = Field(
        default_factory=Edge,
        description="Authentication and a per-client rate limit at each region's load "
        "balancer (with dns); required in production.",
    )
    alerts: Alerting = Field(
        default_factory=Alerting, description="Alert receivers and the runbook's address."
    )
    calibration: list[str] = Field(
        default_factory=list,
        description="Calibration files (`llmfleet calibrate --bench ... --out FILE`), paths "
        "relative to the repository root: each fits one server (model, GPU, TP, precision, "
        "KV dtype) on the user's own `vllm bench serve` runs; a region whose chosen server "
        "one covers is sized with its factors and reports its narrower band.",
    )

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _quoted_version(cls, value: object) -> object:
        """YAML reads `1.30` as the number 1.3: the version must be a quoted string."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            written = f"{value}"
            meant = f'"{written}0" or "{written}"' if len(written.split(".")[-1]) == 1 else (
                f'"{written}"'
            )
            raise ValueError(
                f"YAML reads an unquoted version as a number ({written}: 1.30 becomes 1.3); "
                f"quote it: kubernetes_version: {meant}"
            )
        return value

    @property
    def survive_region_losses(self) -> int:
        given = self.routing.survive_region_losses
        return given if given is not None else min(1, len(self.regions) - 1)
    startup: Startup = Field(
        default_factory=Startup,
        description="A replica's start: the image, where it is pulled through, the traffic "
        "growth the headroom must carry during one cold start.",
    )
    day_profile: DayProfile = Field(
        default_factory=DayProfile,
        description="The day's shape: hours at the peak and at the trough (the daily cost, "
        "`llmfleet simulate`).",
    )

    @model_validator(mode="after")
    def _regions(self) -> CapacityPlan:
        names = [r.name for r in self.regions]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"regions are listed twice: {', '.join(dupes)}")
        idle = [r.name for r in self.regions if r.traffic_share == 0]
        if idle and self.routing.policy != "failover":
            raise ValueError(
                f"regions {', '.join(idle)} have traffic_share 0; with policy latency every "
                "region serves a share above 0 (only a failover secondary takes 0)"
            )
        total = sum(r.traffic_share for r in self.regions)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"regions[].traffic_share must sum to 1.0, not {total:g}")
        if self.model.pins_precision and self.allowed.precisions is not None:
            raise ValueError(
                "model.precision pins one precision and allowed.precisions lists those the "
                "search tries: give one of them"
            )
        if self.model.pins_kv_cache_dtype and self.allowed.kv_cache_dtypes is not None:
            raise ValueError(
                "model.kv_cache_dtype pins one KV dtype and allowed.kv_cache_dtypes lists those "
                "the search tries: give one of them"
            )
        _check_routing(self)
        needed = self.traffic.input_tokens.mean + self.traffic.output_tokens.mean
        if needed > self.max_model_len:
            raise ValueError(
                f"max_model_len ({self.max_model_len}) is below a mean request (input "
                f"{self.traffic.input_tokens.mean} + output {self.traffic.output_tokens.mean})"
            )
        t = self.traffic
        longest_output = t.output_tokens.p99
        if longest_output is not None and longest_output >= self.max_model_len:
            after_mean = longest_output + t.input_tokens.mean
            raise ValueError(
                f"traffic.output_tokens.p99 ({longest_output}) is at or above max_model_len "
                f"({self.max_model_len}): vLLM stops every such request at max_model_len "
                f"minus its prompt, so one in 100 answers would be cut; "
                + self._longer_context(after_mean, f"above {after_mean} (the p99 output "
                                       "after a mean prompt)")
                + " or lower output_tokens.p99"
            )
        p95 = t.input_tokens.p95_or_mean + t.output_tokens.p95_or_mean
        if p95 > self.max_model_len:
            raise ValueError(
                f"max_model_len ({self.max_model_len}) is below a p95 request (input p95 "
                f"{t.input_tokens.p95_or_mean} + output p95 {t.output_tokens.p95_or_mean} = "
                f"{p95}): vLLM would refuse about one request in 20; "
                + self._longer_context(p95, f"to {p95} or more")
            )
        refused = t.input_tokens.share_above(self.max_model_len - 1)
        tail = 1 - self.slo.percentile / 100
        if refused >= tail:
            fits = t.input_tokens.at_percentile(100 * (1 - tail / 10)) + 1
            raise ValueError(
                f"max_model_len ({self.max_model_len}) refuses {refused:.2%} of prompts (the "
                f"lognormal through input_tokens' mean and percentiles exceeds "
                f"{self.max_model_len - 1:,} tokens that often): vLLM rejects them, more than "
                f"the {tail:.2%} the p{self.slo.percentile:g} SLO allows outside it; "
                + self._longer_context(fits, f"to {fits} or more (refusing a tenth of that)")
            )
        if self.environment == "production" and self.cluster.endpoint_public_access:
            open_to_all = [c for c in self.cluster.public_access_cidrs if c.endswith("/0")]
            if open_to_all:
                raise ValueError(
                    f"environment is production but cluster.public_access_cidrs has "
                    f"{', '.join(open_to_all)}: the EKS API would be reachable from anywhere; "
                    "give your CI and office CIDRs, or cluster.endpoint_public_access: false"
                )
        return self

    def _longer_context(self, tokens: int, raise_to: str) -> str:
        """The advice for requests of `tokens`: raise max_model_len, or, where the model's
        own context is shorter, that no max_model_len holds them on this model."""
        ctx = _catalog_context(self.model.id)
        if ctx is not None and tokens > ctx:
            return (
                f"{self.model.id} holds at most {ctx:,} tokens (max_position_embeddings), so "
                f"no max_model_len serves {tokens:,}: shorten the requests to {ctx:,} tokens "
                "or serve a model with a longer context"
            )
        return f"raise max_model_len {raise_to}"


def _catalog_context(model_id: str | None) -> int | None:
    """The context a catalog model holds (max_position_embeddings), None when not known here
    (a config.json model is read after the plan: `plan.model.resolve_model` checks it)."""
    if model_id is None:
        return None
    try:
        config = model_facts.model_entry(model_id).config
    except LlmfleetError:
        return None  # an unknown name is the model check's to refuse, with the names
    ctx = config.get("max_position_embeddings")
    return ctx if isinstance(ctx, int) and ctx > 0 else None


def _check_routing(plan: CapacityPlan) -> None:
    """Losses the region count allows; failover's two regions and their shares; an existing
    VPC with an entry point names where its load balancers live."""
    names = [r.name for r in plan.regions]
    losses = plan.routing.survive_region_losses
    if losses is not None and losses > len(names) - 1:
        raise ValueError(
            f"routing.survive_region_losses = {losses} with {len(names)} region(s) would leave "
            f"none to serve; use at most {len(names) - 1} or add regions"
        )
    if plan.routing.policy == "failover":
        if len(names) != 2:
            raise ValueError(
                f"routing.policy failover takes exactly two regions (a primary and a "
                f"secondary), not {len(names)}; use policy: latency for {len(names)}"
            )
        primary = plan.routing.primary or names[0]
        if primary not in names:
            raise ValueError(
                f"routing.primary {primary!r} is not a listed region ({', '.join(names)})"
            )
        shares = {r.name: r.traffic_share for r in plan.regions}
        if shares[primary] != 1.0:
            raise ValueError(
                f"routing.policy failover sends every user to the primary {primary}: give it "
                f"traffic_share 1.0 (and the secondary 0), not {shares[primary]:g}"
            )
    elif plan.routing.primary is not None:
        raise ValueError("routing.primary applies to policy: failover only; remove it")
    _check_rollout(plan.rollout, names)
    if plan.dns is not None:
        for r in plan.regions:
            if r.network is not None and not r.network.load_balancer_cidrs:
                raise ValueError(
                    f"regions[{r.name}].network.load_balancer_cidrs is required with dns: the "
                    "NetworkPolicy admits the load balancer from the public subnets' CIDRs"
                )


def _check_rollout(rollout: Rollout, names: list[str]) -> None:
    """rollout.order names every region of the plan, each once."""
    if rollout.order is None:
        return
    unknown = [n for n in rollout.order if n not in names]
    twice = sorted({n for n in rollout.order if rollout.order.count(n) > 1})
    missing = [n for n in names if n not in rollout.order]
    if unknown or twice or missing:
        problems = [
            *([f"{', '.join(unknown)} not a listed region"] if unknown else []),
            *([f"{', '.join(twice)} listed twice"] if twice else []),
            *([f"{', '.join(missing)} missing"] if missing else []),
        ]
        raise ValueError(
            f"rollout.order {rollout.order} must name every region once, canary first "
            f"({'; '.join(problems)}); e.g. {names}"
        )
