"""What the routes answer, as typed models for the OpenAPI document (and so the TypeScript client's types).

The routes build their answers with :func:`~memnets.server.wire.to_json` (a memory is
:class:`~memnets.records.Memory`'s fields, a message's outcome
:class:`~memnets.memory.messages.MessageOutcome`'s, a hit's parts :class:`~memnets.memory.explain.ScoreParts`'),
so these models name those types rather than restating them; they document, they never validate an
answer (:func:`documented`). Every field of an answer is always sent: each is required in the document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from memnets.memory.explain import ScoreParts
from memnets.memory.messages import MessageOutcome
from memnets.records import Memory

ANSWERS: list[type[BaseModel]] = []  # every answer documented, for the OpenAPI document's components


class Answer(BaseModel):
    """An answer's JSON object: each field sent, those with a default too."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        ANSWERS.append(cls)


class MemoryAnswer(Answer):
    """One memory: what add, get, update and observe answer."""

    memory: Memory


class MemoriesAnswer(Answer):
    """Memories: a batch add's, in order; a history, oldest first; derived memories."""

    memories: list[Memory]


class MemoryPage(Answer):
    """One page of a listing; ``next_offset``: where the next page starts (null: this was the last)."""

    memories: list[Memory]
    next_offset: int | None


class OutcomesAnswer(Answer):
    """What an add of messages did, one outcome per message, in order."""

    outcomes: list[MessageOutcome]


class Hit(Answer):
    """One search result: the memory, its score and the score's parts."""

    memory: Memory
    score: float
    parts: ScoreParts


class SearchAnswer(Answer):
    """A search's hits, best first; the ranker ("cosine" or "learned") and a learned ranker's weights;
    ``search``: "hybrid" (the dense score fused with the query's words) or "dense"."""

    ranker: str
    weights: dict[str, Any] | None
    search: Literal["hybrid", "dense"]
    results: list[Hit]


class SearchManyAnswer(Answer):
    """The hits of each user searched, by user."""

    by_user: dict[str, list[Hit]]


class Deleted(Answer):
    """Whether a memory was deleted (anything held it)."""

    deleted: bool


class DeletedCount(Answer):
    """How many current memories a delete of a scope deleted."""

    deleted: int


class Users(Answer):
    """The users a token reaches that have memories."""

    users: list[str]


class WhoAmI(Answer):
    """What the request's token reaches."""

    admin: bool
    user: str | None
    agent: str | None
    session: str | None


class ContextView(Answer):
    """The recall gate's verdict and what goes into the prompt (MemoryManager.context_for)."""

    recalled: bool
    gate_score: float | None
    memories: list[Memory]
    messages: list[Memory]


class ManagerSnapshot(Answer):
    """What this process's manager of a user holds in each tier, and the gate's last decisions."""

    context: list[Memory]
    working: list[Memory]
    pending: list[Memory]
    gate: list[dict[str, Any]]
    moves: dict[str, int]


def documented(*answers: type[Answer]) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses``: its 200 answer is one of ``answers`` (their schemas are put into the
    document's components by :func:`~memnets.server.routes.bodies.add_schemas`); FastAPI never
    validates or converts an answer by them."""
    refs = [{"$ref": f"#/components/schemas/{answer.__name__}"} for answer in answers]
    schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
    return {200: {"description": "Successful Response", "content": {"application/json": {"schema": schema}}}}
