"""The part of vLLM 0.33.0's ``Request`` the KV cache managers and the scheduler read
(``v1/request.py``), and the request block hasher (``v1/core/kv_cache_utils.py:953-1036``).

Paths are relative to the ``vllm/`` package. Kept: ids, prompt / output / all token ids, the token
counters, ``max_tokens``, ``status`` (``RequestStatus``, 370-398), ``num_preemptions``,
``num_in_flight_tokens`` (0.33 counts tokens of steps whose output is pending, 148-151),
``spec_token_ids``, ``shared_prefix_boundary`` / ``replay_start``, ``is_prefill_chunk``, and
``block_hashes`` kept up to date as tokens are appended (``update_block_hashes``, 285-288). Token
ids are kept as runs of consecutive ids (``token_runs.TokenRuns``), and a block's hash is the exact
key of its token prefix (``get_request_block_hasher``).

Not kept: sampling / pooling params (only ``max_tokens`` is read), multimodal features, LoRA,
cache salt, prompt embeddings, structured output, events and stats, streaming, KV transfer params:
none of them enters the block hashes of a text-only request without LoRA or a cache salt, where
vLLM's extra keys are ``None``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

from .block_pool import BlockHash
from .token_runs import TokenRuns

__all__ = ["Request", "RequestStatus", "get_request_block_hasher"]


class RequestStatus(enum.IntEnum):
    """``RequestStatus`` (``v1/request.py:370-398``)."""

    WAITING = enum.auto()
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    WAITING_FOR_STREAMING_REQ = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    # Note: anything after PREEMPTED will be considered as a finished status.
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_IGNORED = enum.auto()
    FINISHED_ERROR = enum.auto()

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.PREEMPTED


def get_request_block_hasher(
    hash_block_size: int, num_hash_lookahead_tokens: int = 0
) -> Callable[[Request], list[BlockHash]]:
    """``get_request_block_hasher`` (``kv_cache_utils.py:953-1036``): hashes of the request's new
    full ``hash_block_size`` blocks, chained over the prefix. With ``num_hash_lookahead_tokens``
    (L > 0, EAGLE block drop with prefix caching) a block's hash also covers the next L tokens and
    exists only once they do (its extra keys are ``(None, *next L tokens)``, 1010-1019).

    A block's hash here is the exact key of the token prefix it closes (``TokenRuns.prefix_key`` of
    its last token, L tokens further with lookahead): vLLM's chain is equal for two blocks exactly
    when their token prefixes (and lookahead tokens) are, and so is the key."""

    def request_block_hasher(request: Request) -> list[BlockHash]:
        start_token_idx = len(request.block_hashes) * hash_block_size
        num_tokens = request.num_tokens - num_hash_lookahead_tokens
        if start_token_idx + hash_block_size > num_tokens:
            return []
        key = request._all_token_ids.prefix_key
        return [key(end + num_hash_lookahead_tokens)
                for end in range(start_token_idx + hash_block_size, num_tokens + 1, hash_block_size)]

    return request_block_hasher


class Request:
    """``Request`` (``v1/request.py:61-412``), the fields the managers and the scheduler read."""

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        max_tokens: int = 1,
        block_hasher: Callable[[Request], list[BlockHash]] | None = None,
        arrival_time: float = 0.0,
        priority: int = 0,
    ) -> None:
        self.request_id = request_id
        self.priority = priority
        self.arrival_time = arrival_time
        self.status = RequestStatus.WAITING
        self.max_tokens = max_tokens
        self.prompt_token_ids = (prompt_token_ids.copy() if isinstance(prompt_token_ids, TokenRuns)
                                 else TokenRuns(prompt_token_ids))
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self._output_token_ids = TokenRuns()
        self._all_token_ids = self.prompt_token_ids.copy()
        self.num_output_placeholders = 0
        self.num_stale_output_tokens = 0
        self.num_in_flight_tokens = 0
        self.spec_token_ids: list[int] = []
        self.num_computed_tokens = 0
        self.is_prefill_chunk = False
        self.shared_prefix_boundary = 0
        self.replay_start = 0
        self.num_preemptions = 0
        self.stop_reason = None
        self.kv_transfer_params = None
        self.skip_reading_prefix_cache = False
        self.lora_request = None
        self.mm_features: list = []
        self.block_hashes: list[BlockHash] = []
        self._block_hasher = block_hasher
        self.update_block_hashes()

    @property
    def output_token_ids(self) -> TokenRuns:
        return self._output_token_ids

    @property
    def all_token_ids(self) -> TokenRuns:
        return self._all_token_ids

    def append_output_token_ids(self, token_ids: int | Iterable[int]) -> None:
        """272-283: append, then hash any new full blocks."""
        if isinstance(token_ids, int):
            self._output_token_ids.append(token_ids)
            self._all_token_ids.append(token_ids)
        else:
            if not isinstance(token_ids, range):
                token_ids = list(token_ids)
            self._output_token_ids.extend(token_ids)
            self._all_token_ids.extend(token_ids)
        self.update_block_hashes()

    def update_block_hashes(self) -> None:
        """285-288."""
        if self._block_hasher is not None:
            self.block_hashes.extend(self._block_hasher(self))

    @property
    def num_tokens(self) -> int:
        return self._all_token_ids._len  # (len() of TokenRuns, without the call: read every step)

    @property
    def num_tokens_with_spec(self) -> int:
        return len(self._all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    @property
    def num_encoder_inputs(self) -> int:
        return 0

    @property
    def has_encoder_inputs(self) -> bool:
        return False

    def get_skip_reading_prefix_cache(self) -> bool:
        return self.skip_reading_prefix_cache

    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def __lt__(self, other: Request) -> bool:
        """357-386 (priority, arrival time, then request id)."""
        if self.priority != other.priority:
            return self.priority < other.priority
        if self.arrival_time != other.arrival_time:
            return self.arrival_time < other.arrival_time
        return self.request_id < other.request_id

    def __repr__(self) -> str:
        return (f"Request(id={self.request_id!r}, prompt={self.num_prompt_tokens}, tokens={self.num_tokens}, "
                f"computed={self.num_computed_tokens}, status={self.status.name})")
