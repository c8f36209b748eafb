"""Every command-line option, defined once.

Options come in groups (the LLM connection, the cache, stage-1 sizes, mapping, inference). A group
is a dataclass whose fields are the options; a command asks for a group by declaring a parameter of
that type, and ``expand_options`` spreads the group's fields into the command's signature for
typer and gathers them back into the dataclass before the command runs. So ``anchor build``,
``infer``, ``eval`` and ``analyze`` share the same flags, help texts, defaults and checks.

Defaults and ranges come from the pydantic models the options configure (``BuildParams``,
``MappingConfig``, ``InferenceConfig``, ``LLMSettings``): an option left unset keeps the model's
default, and a value outside the model's range is refused by the command line, naming the flag,
before anything runs. Help texts show the default and, where one exists, the environment variable.
How a group becomes options (``opt``, ``expand_options``) is in ``anchor.cli.option_machinery``.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

# The machinery is re-exported: commands import everything about options from this module.
from anchor.cli.option_machinery import expand_options as expand_options
from anchor.cli.option_machinery import given_flags as given_flags
from anchor.cli.option_machinery import opt, overrides
from anchor.llm.endpoint import CredentialSource, settle_credentials
from anchor.llm.settings import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_CACHE_DIR,
    ENV_CONCURRENCY,
    ENV_CONTEXT_TOKENS,
    ENV_EMBED_API_KEY,
    ENV_EMBED_BASE_URL,
    ENV_EMBED_BATCH_WINDOW_MS,
    ENV_EMBED_MAX_BATCH,
    ENV_EMBED_MODEL,
    ENV_MODEL,
    ENV_RETRIES,
    ENV_TIMEOUT,
    LLMSettings,
)
from anchor.settings.inference import INFERENCE_RULES, AggregationMethod, InferenceConfig, InferenceRule
from anchor.settings.mapping import RETRIEVER_NAMES, MappingConfig
from anchor.settings.space import BuildParams
from anchor.text import same_text
from anchor.truth.settings import STRUCTURE_CHOICES, GenerationSettings
from anchor.types import Scenario

LLM_PANEL = "LLM backend"
BUILD_PANEL = "Factor space (stage 1)"
MAP_PANEL = "Mapping (stage 2)"
INFER_PANEL = "Inference (stage 3) and ablations"
SCENARIO_PANEL = "Scenario"
ESTIMATOR_PANEL = "Probability-estimator LLM"
EMBED_PANEL = "Embeddings"
CALIBRATION_PANEL = "Calibration"
ENV_ESTIMATOR_BASE_URL = "ANCHOR_ESTIMATOR_BASE_URL"
ENV_ESTIMATOR_MODEL = "ANCHOR_ESTIMATOR_MODEL"
ENV_ESTIMATOR_API_KEY = "ANCHOR_ESTIMATOR_API_KEY"




# --------------------------------------------------------------------------- groups


@dataclasses.dataclass
class ConnectionOptions:
    """Where the LLM is and how hard to try."""

    base_url: Annotated[str | None, opt("--base-url", panel=LLM_PANEL, env=ENV_BASE_URL, help=(
        "OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; unset = the embedded model."))] = None
    model: Annotated[str | None, opt("--model", panel=LLM_PANEL, env=ENV_MODEL, help=(
        "Model name on the server; unset = the server's first listed model."))] = None
    api_key: Annotated[str | None, opt("--api-key", panel=LLM_PANEL, env=ENV_API_KEY, help=(
        "API key, if the server wants one; prefer the environment variable. Never written to any file "
        "or log."))] = None
    timeout: Annotated[float | None, opt("--timeout", panel=LLM_PANEL, env=ENV_TIMEOUT,
                                         bound=(LLMSettings, "timeout"),
                                         help="Seconds to wait for one request before retrying it.")] = None
    retries: Annotated[int | None, opt("--retries", panel=LLM_PANEL, env=ENV_RETRIES,
                                       bound=(LLMSettings, "transport_retries"),
                                       help="Retries of a request after HTTP 429/5xx, time-outs or dropped "
                                            "connections, with exponential back-off.")] = None
    parse_retries: Annotated[int | None, opt("--parse-retries", panel=LLM_PANEL,
                                             bound=(LLMSettings, "parse_retries"),
                                             help="Re-asks after a malformed or off-schema answer "
                                                  "(the paper allows 20).")] = None
    concurrency: Annotated[int | None, opt("--concurrency", panel=LLM_PANEL, env=ENV_CONCURRENCY,
                                           bound=(LLMSettings, "max_concurrency"),
                                           help="Requests in flight at once (the embedded model runs one "
                                                "at a time whatever this says).")] = None
    context_tokens: Annotated[int | None, opt("--context-tokens", panel=LLM_PANEL, env=ENV_CONTEXT_TOKENS,
                                              bound=(LLMSettings, "context_tokens"), help=(
        "The model's context window in tokens. A prompt whose condition (a long document) would not fit "
        "keeps the condition's beginning and a marked omission, recorded in the trace and the prediction. "
        "Default: 8192 (a server; set it to the server's real window) or the embedded model's n_ctx 8192, "
        "which this also sets."))] = None
    embed_base_url: Annotated[str | None, opt("--embed-base-url", panel=EMBED_PANEL, env=ENV_EMBED_BASE_URL, help=(
        "OpenAI-compatible embeddings server (vLLM, Text Embeddings Inference, Ollama), e.g. "
        "http://127.0.0.1:8080/v1: every text is embedded there instead of by the bundled MiniLM. "
        "Unset = the bundled model."))] = None
    embed_model: Annotated[str | None, opt("--embed-model", panel=EMBED_PANEL, env=ENV_EMBED_MODEL, help=(
        "Embedding model on that server (default: sentence-transformers/all-MiniLM-L6-v2, the bundled "
        "model's name, under which its spaces can be used). A space is only mapped by the embedder named "
        "when it was built."))] = None
    embed_api_key: Annotated[str | None, opt("--embed-api-key", panel=EMBED_PANEL, env=ENV_EMBED_API_KEY, help=(
        "API key of the embeddings server, if it wants one; prefer the environment variable. Never "
        "written to any file or log."))] = None
    embed_max_batch: Annotated[int | None, opt("--embed-max-batch", panel=EMBED_PANEL, env=ENV_EMBED_MAX_BATCH,
                                               bound=(LLMSettings, "embed_max_batch"), help=(
        "Most texts that concurrent calls (online requests, a job's rows, several cases being mapped) put into "
        "one embedding call: one MiniLM pass, or one request to --embed-base-url. Default: 32 for the bundled "
        "MiniLM (its CPU a text stops falling past 8), 128 for a server. Vectors do not depend on it."))] = None
    embed_batch_window_ms: Annotated[float | None, opt("--embed-window-ms", panel=EMBED_PANEL,
                                                       env=ENV_EMBED_BATCH_WINDOW_MS,
                                                       bound=(LLMSettings, "embed_batch_window_ms"), help=(
        "Milliseconds a batch may wait for more calls when the embedder is free and calls keep coming (a lone "
        "call never waits). Default 0: only calls that arrive while the embedder is busy are gathered."))] = None

    FIELDS: typing.ClassVar[dict[str, str]] = {
        "base_url": "base_url", "model": "model", "api_key": "api_key", "timeout": "timeout",
        "retries": "transport_retries", "parse_retries": "parse_retries", "concurrency": "max_concurrency",
        "context_tokens": "context_tokens", "embed_base_url": "embed_base_url", "embed_model": "embed_model",
        "embed_api_key": "embed_api_key", "embed_max_batch": "embed_max_batch",
        "embed_batch_window_ms": "embed_batch_window_ms",
    }


@dataclasses.dataclass
class CacheDirOption:
    cache_dir: Annotated[Path | None, opt("--cache-dir", panel=LLM_PANEL, env=ENV_CACHE_DIR, help=(
        "Folder of the response and vector caches (default: the user cache folder, "
        "~/.cache/anchor on Linux)."))] = None


@dataclasses.dataclass
class CacheOptions(CacheDirOption):
    """The response cache."""

    no_cache: Annotated[bool, opt("--no-cache", panel=LLM_PANEL, show_default=False, help=(
        "Ask the LLM even when the answer is in the response cache (and store nothing)."))] = False


@dataclasses.dataclass
class SeedOption:
    seed: Annotated[int | None, opt("--seed", panel=LLM_PANEL, bound=(LLMSettings, "seed"), help=(
        "Sampling seed; answers for different seeds are cached apart."))] = None


#: ``--calibrator`` of ``anchor infer`` and ``anchor eval``: a file written by ``anchor calibrate fit``.
CalibratorOption = Annotated[Path | None, typer.Option("--calibrator", rich_help_panel=CALIBRATION_PANEL, help=(
    "Pass every P(O1) through this calibrator (a file from `anchor calibrate fit`); the raw probability is kept "
    "beside the calibrated one. Unknown stays unknown. Warns when it was fitted on another model or method."))]


def llm_settings(conn: ConnectionOptions, cache: CacheOptions | None = None, seed: SeedOption | None = None,
                 **extra: Any) -> LLMSettings:
    """Settings from the environment, overridden by the flags that were given."""
    values = overrides(conn, ConnectionOptions.FIELDS)
    if cache is not None:
        values["use_cache"] = not cache.no_cache
        if cache.cache_dir is not None:
            values["cache_dir"] = cache.cache_dir
    if seed is not None and seed.seed is not None:
        values["seed"] = seed.seed
    values.update(extra)
    return LLMSettings.from_env(**values)


ENV_WORKERS = "ANCHOR_WORKERS"
#: The most --workers accepted: more helper processes, or Ray actors, than any run could give work to.
MAX_WORKERS = 1024
ENV_RAY = "ANCHOR_RAY"
SCALE_PANEL = "Processes and clusters"


@dataclasses.dataclass
class ScaleOptions:
    """Where instances are answered: this process, helper processes, or a Ray cluster."""

    workers: Annotated[str | None, opt("--workers", panel=SCALE_PANEL, env=ENV_WORKERS, metavar="N|auto", help=(
        "Processes that answer scenario groups, each with its share of --concurrency (the run directory is "
        "written by this one); 'auto' = one per core with a server, 1 with the embedded model. Default 1: "
        "extra processes pay off only when anchor's own CPU, not the server, is the limit (docs/scale.md). "
        "With --ray: the number of Ray actors (default: one per CPU of the cluster). At most the run's scenario "
        f"groups (and, for processes, the cores) are started; more than {MAX_WORKERS} is refused."))] = None
    ray: Annotated[str | None, opt("--ray", panel=SCALE_PANEL, env=ENV_RAY, metavar="ADDRESS", help=(
        "Answer on a Ray cluster (pip install 'anchor-infer[ray]'): 'auto' = the one `ray start` began, "
        "ray://HOST:10001 or HOST:6379 = another, 'local' = a new one in this process. See docs/scale.md."))] = None

    @staticmethod
    def cores(uses_server: bool) -> int:
        """'auto': every core for a server; one process for the embedded model, which uses every core."""
        return (os.cpu_count() or 1) if uses_server else 1

    def resolve(self, uses_server: bool) -> tuple[int, str | None]:
        """(workers, Ray address): the flags, else their environment variables, else the defaults; checked.
        Workers 0 with Ray: one actor per CPU of the cluster."""
        given = self.workers if self.workers is not None else (os.environ.get(ENV_WORKERS, "").strip() or None)
        ray = self.ray if self.ray is not None else (os.environ.get(ENV_RAY, "").strip() or None)
        if given is None:
            workers = 0 if ray is not None else 1
        elif given.strip().lower() == "auto":
            workers = 0 if ray is not None else self.cores(uses_server)
        elif given.strip().isdigit() and 1 <= int(given) <= MAX_WORKERS:
            workers = int(given)
        else:
            where = "--workers" if self.workers is not None else ENV_WORKERS
            raise typer.BadParameter(f"{where} must be a whole number from 1 to {MAX_WORKERS}, or auto; got {given!r}",
                                     param_hint="--workers")
        return workers, ray.strip() if ray is not None else None


@dataclasses.dataclass
class EstimatorOptions:
    """A second LLM that elicits only phi and the latent parameters (``anchor analyze estimator``)."""

    estimator_base_url: Annotated[str | None, opt("--estimator-base-url", panel=ESTIMATOR_PANEL,
                                                  env=ENV_ESTIMATOR_BASE_URL, help=(
        "OpenAI-compatible server of the probability-estimator LLM (the factor space and the mapping stay "
        "with --base-url/--model)."))] = None
    estimator_model: Annotated[str | None, opt("--estimator-model", panel=ESTIMATOR_PANEL, env=ENV_ESTIMATOR_MODEL,
                                               help="Model name on that server; unset = its first listed "
                                                    "model.")] = None
    estimator_api_key: Annotated[str | None, opt("--estimator-api-key", panel=ESTIMATOR_PANEL,
                                                 env=ENV_ESTIMATOR_API_KEY, help=(
        "API key of the estimator's server, if it wants one; prefer the environment variable. Never written "
        "to any file or log."))] = None
    estimator_seed: Annotated[int | None, opt("--estimator-seed", panel=ESTIMATOR_PANEL,
                                              bound=(LLMSettings, "seed"), show_default=False, help=(
        "Sampling seed of the estimator (default: the main --seed; with the embedded model on both sides, "
        "the main seed + 1, so that the two are not the same model answering the same requests)."))] = None

    def _value(self, name: str, env: str) -> str | None:
        value = getattr(self, name)
        if value is None:
            value = os.environ.get(env, "").strip() or None
        return value

    @property
    def base_url(self) -> str | None:
        """--estimator-base-url, or its environment variable."""
        return self._value("estimator_base_url", ENV_ESTIMATOR_BASE_URL)

    def settings(self, main: LLMSettings) -> LLMSettings:
        """The estimator's settings: the main ones (time-outs, retries, cache, concurrency) with the
        estimator's server, model, key and seed. No estimator server = the embedded model."""
        url = self.base_url
        seed = self.estimator_seed
        if seed is None:
            seed = main.seed + 1 if not (url or main.uses_server) else main.seed
        key = self._value("estimator_api_key", ENV_ESTIMATOR_API_KEY)
        url_given, key_given = self.estimator_base_url is not None, self.estimator_api_key is not None
        url, key = settle_credentials(url, key, CredentialSource(
            url_name="--estimator-base-url" if url_given else ENV_ESTIMATOR_BASE_URL,
            key_name="--estimator-api-key" if key_given else ENV_ESTIMATOR_API_KEY,
            url_given=url_given, key_given=key_given))
        values = main.model_dump()
        values.update(base_url=url, model=self._value("estimator_model", ENV_ESTIMATOR_MODEL), seed=seed, api_key=key)
        if url is None:
            values["context_tokens"] = None  # the embedded model's own window, not the server's
        return LLMSettings.model_validate(values)


@dataclasses.dataclass
class ScenarioOptions:
    scenario: Annotated[str | None, opt("--scenario", panel=SCENARIO_PANEL, help=(
        "The scenario; may be empty (fact checking)."))] = None
    outcome1: Annotated[str | None, opt("--outcome1", panel=SCENARIO_PANEL, help="Outcome O1.")] = None
    outcome2: Annotated[str | None, opt("--outcome2", panel=SCENARIO_PANEL,
                                        help="The competing outcome O2.")] = None

    def given(self) -> bool:
        return any(v is not None for v in (self.scenario, self.outcome1, self.outcome2))

    def build(self) -> Scenario:
        """The scenario; a missing or blank outcome is a usage error naming its flag."""
        for flag, value in (("--outcome1", self.outcome1), ("--outcome2", self.outcome2)):
            if value is None:
                raise typer.BadParameter("give --outcome1 and --outcome2 (and usually --scenario)",
                                         param_hint=flag)
            if not value.strip():
                raise typer.BadParameter("is empty (only whitespace)", param_hint=flag)
        if same_text(self.outcome1, self.outcome2):
            raise typer.BadParameter("must differ from --outcome2 (ignoring case, spacing, Unicode normalisation "
                                     "and invisible characters)", param_hint="--outcome1")
        return Scenario(text=self.scenario or "", outcome1=self.outcome1, outcome2=self.outcome2)


@dataclasses.dataclass
class BuildOptions:
    """Stage-1 sizes and switches (defaults: the paper's Appendix B values for Common2Sense)."""

    n_target: Annotated[int | None, opt("--n-target", panel=BUILD_PANEL, bound=(BuildParams, "n_target"), help=(
        "Stop growing the factor space at this many factors (paper: 80; 40 for Today and fact checking)."))] = None
    batch_size: Annotated[int | None, opt("--batch-size", panel=BUILD_PANEL, bound=(BuildParams, "batch_size"),
                                          help="b: sentences generated per abduction round (paper: 10; 5).")] = None
    max_rounds: Annotated[int | None, opt("--max-rounds", panel=BUILD_PANEL, bound=(BuildParams, "max_rounds"),
                                          help="T_max: most abduction rounds (paper: 20; 10).")] = None
    patience: Annotated[int | None, opt("--patience", panel=BUILD_PANEL, bound=(BuildParams, "patience"),
                                        help="Stop after this many rounds in a row that add no factor.")] = None
    vote_samples: Annotated[int | None, opt("--vote-samples", panel=BUILD_PANEL,
                                            bound=(BuildParams, "vote_samples"),
                                            help="m: self-consistency samples per factor label.")] = None
    vote_batch: Annotated[int | None, opt("--vote-batch", panel=BUILD_PANEL, bound=(BuildParams, "vote_batch_size"),
                                          help="Factors labelled per LLM call (1 = one at a time).")] = None
    dedup_threshold: Annotated[float | None, opt("--dedup-threshold", panel=BUILD_PANEL,
                                                 bound=(BuildParams, "dedup_threshold"),
                                                 help="Cosine similarity from which a new factor is a "
                                                      "duplicate.")] = None
    abduction_temperature: Annotated[float | None, opt("--abduction-temperature", panel=BUILD_PANEL, help=(
        "Sampling temperature of each abduction round's sentences."), bound=(BuildParams, "abduction_temperature"))] = None
    vote_temperature: Annotated[float | None, opt("--vote-temperature", panel=BUILD_PANEL, help=(
        "Sampling temperature of the m label votes."), bound=(BuildParams, "vote_temperature"))] = None
    no_cluster: Annotated[bool, opt("--no-cluster", panel=BUILD_PANEL, show_default=False, help=(
        "'w/o cluster' ablation: one flat factor group, no UMAP/HDBSCAN."))] = False
    no_prune: Annotated[bool, opt("--no-prune", panel=BUILD_PANEL, show_default=False,
                                  help="Keep redundant members of a cluster.")] = False
    check_relevance: Annotated[bool, opt("--check-relevance", panel=BUILD_PANEL, show_default=False, help=(
        "Also ask, in a request of its own each abduction round, whether every candidate factor bears on the "
        "scenario (by default the extraction prompt leaves out what does not; spaces and runs made before "
        "this default changed were built with it)."))] = False
    abduction_window: Annotated[int | None, opt("--abduction-window", panel=BUILD_PANEL,
                                                bound=(BuildParams, "abduction_window"), help=(
        "w: abduction rounds in flight at once. Later rounds generate, extract and validate while earlier ones "
        "finish; rounds still merge in order, so a window gives the same space every time from the same "
        "cache. 1 = one round at a time. Rounds started before the stop are paid for and listed, not "
        "merged."))] = None

    FIELDS: typing.ClassVar[dict[str, str]] = {
        "n_target": "n_target", "batch_size": "batch_size", "max_rounds": "max_rounds", "patience": "patience",
        "vote_samples": "vote_samples", "vote_batch": "vote_batch_size", "dedup_threshold": "dedup_threshold",
        "abduction_temperature": "abduction_temperature", "vote_temperature": "vote_temperature",
        "abduction_window": "abduction_window",
    }

    def params(self, base: BuildParams | None = None, *, seed: int = 0) -> BuildParams:
        """``base`` (default: the paper's sizes) with the given options applied."""
        values = (base or BuildParams()).model_dump()
        values.update(overrides(self, self.FIELDS))
        values["seed"] = seed
        if self.dedup_threshold is not None:
            values["borderline_threshold"] = min(values["borderline_threshold"], self.dedup_threshold)
        if self.no_cluster:
            values["cluster"] = False
        if self.no_prune:
            values["prune"] = False
        if self.check_relevance:
            values["check_relevance"] = True
        return BuildParams.model_validate(values)


@dataclasses.dataclass
class MappingOptions:
    """Stage-2 settings (defaults: K1=3, K2=5, alpha=0.5, R=3, vote ratio 0.5)."""

    k1: Annotated[int | None, opt("--k1", panel=MAP_PANEL, bound=(MappingConfig, "k1"),
                                  help="K1: clusters kept by the coarse search.")] = None
    k2: Annotated[int | None, opt("--k2", panel=MAP_PANEL, bound=(MappingConfig, "k2"),
                                  help="K2: factors kept per cluster (and among unclustered factors).")] = None
    alpha: Annotated[float | None, opt("--alpha", panel=MAP_PANEL, bound=(MappingConfig, "alpha"),
                                       help="Weight of the theme in a cluster prototype.")] = None
    rounds: Annotated[int | None, opt("--rounds", panel=MAP_PANEL, bound=(MappingConfig, "rounds"),
                                      help="R: independent LLM selections that vote.")] = None
    vote_ratio: Annotated[float | None, opt("--vote-ratio", panel=MAP_PANEL, bound=(MappingConfig, "vote_ratio"),
                                            help="Keep factors with at least ceil(ratio x R) votes.")] = None
    selection_temperature: Annotated[float | None, opt("--selection-temperature", panel=MAP_PANEL, help=(
        "Sampling temperature of the R selections."), bound=(MappingConfig, "selection_temperature"))] = None
    no_reflection: Annotated[bool, opt("--no-reflection", panel=MAP_PANEL, show_default=False,
                                       help="Skip the reflection pass after the vote.")] = False
    no_hierarchy: Annotated[bool, opt("--no-hierarchy", panel=MAP_PANEL, show_default=False, help=(
        "'w/o hierarchy' ablation: one flat nearest-neighbour search with the same budget."))] = False
    retriever: Annotated[str | None, opt("--retriever", panel=MAP_PANEL, choices=RETRIEVER_NAMES, help=(
        "Candidate search: exact nearest neighbours (knn, the paper's; default), a FAISS flat (exact) or HNSW "
        "(approximate) index, or BM25 over the factor and theme texts."))] = None

    FIELDS: typing.ClassVar[dict[str, str]] = {
        "k1": "k1", "k2": "k2", "alpha": "alpha", "rounds": "rounds", "vote_ratio": "vote_ratio",
        "selection_temperature": "selection_temperature",
    }

    def config(self) -> MappingConfig:
        values = overrides(self, self.FIELDS)
        if self.no_reflection:
            values["reflection"] = False
        if self.no_hierarchy:
            values["hierarchical"] = False
        if self.retriever is not None:
            values["retriever"] = self.retriever
        return MappingConfig.model_validate(values)


@dataclasses.dataclass
class InferenceOptions:
    """Stage-3 settings and the inference ablations."""

    w_nb: Annotated[float | None, opt("--w-nb", panel=INFER_PANEL, bound=(InferenceConfig, "w_nb"), help=(
        "LOP weight of Naive Bayes (the paper: 0.8 with Qwen2.5-32B, 0.5 with 72B); weights are rescaled "
        "to sum to 1."))] = None
    w_cbn: Annotated[float | None, opt("--w-cbn", panel=INFER_PANEL, bound=(InferenceConfig, "w_cbn"),
                                       help="LOP weight of the latent CBN (paper: 0.2 with 32B, 0.5 with "
                                            "72B).")] = None
    tau: Annotated[float | None, opt("--tau", panel=INFER_PANEL, bound=(InferenceConfig, "tau"), help=(
        "Unknown when the larger of P(O1), P(O2) is below tau."))] = None
    eps: Annotated[float | None, opt("--eps", panel=INFER_PANEL, bound=(InferenceConfig, "eps"), help=(
        "Elicited probabilities are clipped to [eps, 1 - eps] so no factor is decisive."))] = None
    smoothing: Annotated[float | None, opt("--smoothing", panel=INFER_PANEL, bound=(InferenceConfig, "smoothing"),
                                           help="Laplace smoothing of label-count latent tables ('w/o "
                                                "pe-llm'; the paper's epsilon = 0.5).")] = None
    max_latents: Annotated[int | None, opt("--max-latents", panel=INFER_PANEL,
                                           bound=(InferenceConfig, "max_latents"),
                                           help="Most latent concepts the LLM may form per condition.")] = None
    elicit_temperature: Annotated[float | None, opt("--elicit-temperature", panel=INFER_PANEL, help=(
        "Sampling temperature of the phi and latent-parameter elicitation."), bound=(InferenceConfig, "temperature"))] = None
    inference: Annotated[str | None, opt("--inference", panel=INFER_PANEL, choices=INFERENCE_RULES, help=(
        "How the elicited numbers are read: 'paper', as the ANCHOR paper (even odds, phi doubling as the latent "
        "link); 'consistent', each as its prompt asks, with the scenario's base rate elicited once and counted "
        "once (exact in every world of the models' shape, whatever the base rate; docs/inference.md). Default: "
        "consistent for predict, serve, infer, explain and build; paper for eval and the analyses."))] = None
    base_rate: Annotated[float | None, opt("--base-rate", panel=INFER_PANEL, bound=(InferenceConfig, "base_rate"),
                                           help="The scenario's base rate P(outcome 1), when you know it (the "
                                                "consistent rule; default: elicited once per scenario).")] = None
    no_cbn: Annotated[bool, opt("--no-cbn", panel=INFER_PANEL, show_default=False,
                                help="'w/o cbn' ablation: Naive Bayes only.")] = False
    no_nb: Annotated[bool, opt("--no-nb", panel=INFER_PANEL, show_default=False,
                               help="'w/o nb' ablation: the latent CBN only.")] = False
    no_pe_llm: Annotated[bool, opt("--no-pe-llm", panel=INFER_PANEL, show_default=False, help=(
        "'w/o pe-llm' ablation: factor and latent parameters from the voting labels, not elicited."))] = False
    bma: Annotated[bool, opt("--bma", panel=INFER_PANEL, show_default=False,
                             help="Bayesian model averaging instead of the linear opinion pool.")] = False

    FIELDS: typing.ClassVar[dict[str, str]] = {
        "w_nb": "w_nb", "w_cbn": "w_cbn", "tau": "tau", "eps": "eps", "smoothing": "smoothing",
        "max_latents": "max_latents", "elicit_temperature": "temperature", "base_rate": "base_rate",
    }

    def config(self, default_rule: InferenceRule = "paper") -> InferenceConfig:
        """The stage-3 settings; ``default_rule`` is the command's own when --inference is not given."""
        rule = self.inference or default_rule
        if self.base_rate is not None and rule != "consistent":
            raise typer.BadParameter("only the consistent rule counts a base rate: add --inference consistent",
                                     param_hint="--base-rate")
        if self.no_nb and self.no_cbn:
            raise typer.BadParameter("cannot be combined with --no-cbn: at least one of Naive Bayes and the "
                                     "latent CBN must be used", param_hint="--no-nb")
        if self.w_nb == 0 and self.w_cbn == 0 and not (self.no_nb or self.no_cbn or self.bma):
            raise typer.BadParameter("--w-nb and --w-cbn cannot both be 0 (the pool needs some weight)",
                                     param_hint="--w-nb/--w-cbn")
        values = overrides(self, self.FIELDS)
        values["rule"] = rule
        values.update({"use_cbn": not self.no_cbn, "use_nb": not self.no_nb, "llm_parameters": not self.no_pe_llm,
                       "aggregation": AggregationMethod.BMA if self.bma else AggregationMethod.LOP})
        return InferenceConfig.model_validate(values)

    def ablations(self, build: BuildOptions | None = None, mapping: MappingOptions | None = None) -> list[str]:
        """The ablation flags that were given, by their names in ``anchor.pipeline.ABLATIONS``."""
        flags = {"no-cbn": self.no_cbn, "no-nb": self.no_nb, "no-pe-llm": self.no_pe_llm, "bma": self.bma,
                 "no-cluster": bool(build and build.no_cluster), "no-hierarchy": bool(mapping and mapping.no_hierarchy)}
        return [name for name, on in flags.items() if on]


WORLD_PANEL = "Worlds"


@dataclasses.dataclass
class WorldOptions:
    """What ``anchor truth make`` generates (anchor.truth.generate.GenerationSettings)."""

    structure: Annotated[str, opt("--structure", panel=WORLD_PANEL, choices=STRUCTURE_CHOICES, help=(
        "The hidden network: naive-bayes (factors independent given the outcome), latent (outcome -> latent "
        "theme -> factors, the network ANCHOR assumes), interaction (factors that matter together, which "
        "neither model represents), or all three."), default="all")] = "all"
    worlds: Annotated[int, opt("--worlds", panel=WORLD_PANEL, bound=(GenerationSettings, "n_worlds"), help=(
        "Worlds of each structure."))] = GenerationSettings.model_fields["n_worlds"].default
    conditions: Annotated[int, opt("--conditions", panel=WORLD_PANEL, bound=(GenerationSettings, "n_conditions"),
                                   help="Conditions (cases) per world, of the four kinds: factors, paraphrase, "
                                        "distractor, nothing.")] = GenerationSettings.model_fields["n_conditions"].default
    seed: Annotated[int, opt("--seed", panel=WORLD_PANEL, bound=(GenerationSettings, "seed"), help=(
        "Seed of every draw: the same seed and anchor version give the same file."))] = 0
    prior: Annotated[float, opt("--prior", panel=WORLD_PANEL, bound=(GenerationSettings, "prior"), help=(
        "P(outcome 1) before anything is known, in every world: the truth of a condition that states nothing."
        ))] = GenerationSettings.model_fields["prior"].default

    def settings(self) -> GenerationSettings:
        return GenerationSettings(structure=self.structure, n_worlds=self.worlds,  # type: ignore[arg-type]
                                  n_conditions=self.conditions, seed=self.seed, prior=self.prior)


@dataclasses.dataclass
class NetworkOptions:
    """A published Bayesian network as the world, instead of generated ones (anchor.truth.networks)."""

    network: Annotated[list[str] | None, opt("--network", panel=WORLD_PANEL, metavar="NAME", help=(
        "A published network pgmpy ships (bnlearn repository), read from its package data: one world each "
        "(repeatable, or NAME,NAME). Its truth is exact inference in the network. `--network list` lists them. "
        "Not with --structure or --worlds."))] = None
    outcome: Annotated[str | None, opt("--outcome", panel=WORLD_PANEL, metavar="NODE=STATE", help=(
        "With one --network: outcome 1 is NODE in STATE, outcome 2 any other state (default: the outcome "
        "written for the network, else the node with the most ancestors)."))] = None

    def names(self) -> list[str]:
        return [name.strip() for given in self.network or [] for name in given.split(",") if name.strip()]


#: Model field -> the flag that sets it, for validation messages that escape the range checks
#: (cross-field rules such as "outcome1 and outcome2 must differ").
FLAG_NAMES: dict[str, str] = {
    **{model: f"--{name.replace('_', '-')}" for group in (BuildOptions, MappingOptions, InferenceOptions)
       for name, model in group.FIELDS.items()},
    **{model: f"--{name.replace('_', '-')}" for name, model in ConnectionOptions.FIELDS.items()},
    "outcome1": "--outcome1", "outcome2": "--outcome2", "text": "--scenario",
}
