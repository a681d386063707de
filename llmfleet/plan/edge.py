"""The plan's public edge: who may call the API through each region's load balancer
(`EdgeAuth`: JWT validation or Amazon Cognito at the ALB) and how fast one client may call it
(`RateLimit`: an AWS WAF rate-based rule).

Auth is enforced by the ALB before a request reaches a GPU: a bad or missing credential
costs nothing downstream. `jwt` is for programs (a bearer token from your identity provider's
client-credentials flow, checked against its JWKS; AWS Load Balancer Controller v2.15.0 or
later, `alb.ingress.kubernetes.io/jwt-validation`); `cognito` is the browser sign-in flow of
an Amazon Cognito user pool (redirects, a session cookie), for people using a web client.
vLLM's own `api_key` is a single static key every client shares, checked only once a request
reaches a pod: it may be added, but it is not the edge's authentication."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from llmfleet.data import Data

EdgeBalancing = Literal["least_outstanding", "prefix_aware"]
"""least_outstanding: the ALB's least outstanding requests (today's behaviour);
prefix_aware: a cache-aware router behind the ALB (fleetplan.prefix_router)."""

HTTPS_URL = r"^https://[^\s/$.?#][^\s]*$"
WAF_WINDOWS_S = (60, 120, 300, 600)
"""AWS WAF rate-based rules count over one of these windows (EvaluationWindowSec)."""
WAF_MIN_LIMIT = 10
"""The lowest limit AWS WAF accepts for a rate-based rule (WAF developer guide,
waf-rule-statement-type-rate-based-high-level-settings)."""
WAF_MAX_LIMIT = 2_000_000_000


class JwtAuth(Data):
    """Bearer JWTs checked by the ALB: RS256 signatures against the issuer's JWKS, `exp` and
    `iss` always, `nbf` and `iat` when present, and the scopes listed here."""

    issuer: str = Field(pattern=HTTPS_URL, description="The `iss` the tokens must carry.")
    jwks_url: str = Field(
        pattern=HTTPS_URL,
        description="The issuer's JSON Web Key Set; public, at most 10 keys and 150 KB (ALB).",
    )
    scopes: list[str] = Field(
        default_factory=list,
        description="Scopes the token's `scope` claim must all hold (space-separated values).",
    )


class CognitoAuth(Data):
    """Amazon Cognito's hosted sign-in: browsers are redirected, then carry a session cookie."""

    user_pool_arn: str = Field(
        pattern=r"^arn:aws[a-z-]*:cognito-idp:[a-z0-9-]+:\d{12}:userpool/",
        description="The Cognito user pool users sign in to.",
    )
    user_pool_client_id: str = Field(
        min_length=1,
        description="Its app client, allowing the callback https://<name>/oauth2/idpresponse.",
    )
    user_pool_domain: str = Field(
        pattern=r"^[a-z0-9](-?[a-z0-9])*$",
        description="The domain prefix (my-domain), not the full URL.",
    )


class EdgeAuth(Data):
    """Exactly one of `jwt` (API clients) or `cognito` (browser users)."""

    jwt: JwtAuth | None = Field(
        default=None,
        description="API clients: the ALB validates each request's bearer JWT (RS256).",
    )
    cognito: CognitoAuth | None = Field(
        default=None, description="Browser users: sign-in through a Cognito user pool."
    )

    @model_validator(mode="after")
    def _one(self) -> EdgeAuth:
        if (self.jwt is None) == (self.cognito is None):
            raise ValueError("give exactly one of edge.auth.jwt (API clients) or "
                             "edge.auth.cognito (browser sign-in)")
        return self

    @property
    def kind(self) -> Literal["jwt", "cognito"]:
        return "jwt" if self.jwt is not None else "cognito"


class RateLimit(Data):
    """An AWS WAF rate-based rule: a client sending more than `requests` in `window_s` gets
    429 until its rate drops (WAF's limiting is approximate, not an exact count)."""

    requests: int = Field(
        ge=WAF_MIN_LIMIT,
        le=WAF_MAX_LIMIT,
        description="Requests one client may send per window (WAF: 10 or more).",
    )
    window_s: int = Field(default=60, description="60, 120, 300 or 600 seconds.")
    per: Literal["ip", "token"] = Field(
        default="ip",
        description="ip: per client address; token: per Authorization header (per API "
        "client behind a shared address; needs edge.auth).",
    )

    @model_validator(mode="after")
    def _window(self) -> RateLimit:
        if self.window_s not in WAF_WINDOWS_S:
            raise ValueError(
                f"AWS WAF counts over 60, 120, 300 or 600 s only, not {self.window_s}; e.g. 60"
            )
        return self


class Edge(Data):
    """Who may call each region's public entry point, how fast, and how its requests
    spread over the replicas."""

    auth: EdgeAuth | None = Field(
        default=None, description="Authentication at the ALB; required in production."
    )
    rate_limit: RateLimit | None = Field(
        default=None, description="Per-client limit (AWS WAF); required in production."
    )
    balancing: EdgeBalancing = Field(
        default="least_outstanding",
        description="How each region spreads requests over its replicas. least_outstanding: "
        "the ALB sends each to the replica with the fewest in flight, blind to what each "
        "replica caches. prefix_aware: the ALB sends them to a cache-aware router "
        "(vllm-router, policy cache_aware) that sends a prompt to the replica holding its "
        "longest prefix, so a conversation's turns find their cache (traffic.turns, "
        "traffic.shared_prefix_tokens); needs dns (docs/prefix-caching.md).",
        examples=["prefix_aware"],
    )

    @model_validator(mode="after")
    def _token_needs_auth(self) -> Edge:
        if self.rate_limit is not None and self.rate_limit.per == "token" and self.auth is None:
            raise ValueError(
                "edge.rate_limit.per: token counts per Authorization header, which only "
                "edge.auth makes every request carry; give edge.auth or use per: ip"
            )
        return self
