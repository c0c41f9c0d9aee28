"""Request bodies, made from the one model of a call's arguments (:mod:`memnets.memory.fields`), and the
answers of the routes that return memories.

Each call's body (:func:`typed_body`) is a model whose fields are the call's arguments with their wire
types, meanings and bounds: it is what the OpenAPI document says of the body (and so what the
TypeScript client's types are generated from). The route reads the body through :func:`arguments_body`,
a model of the same fields that checks nothing but that it is an object with the fields a call cannot go
without: every value goes to the API call as it is (times parsed), and the API's own validation names
what is wrong, in the same words as the embedded API and every other door; a field no call takes is refused
by name (:meth:`ArgumentsBody.arguments`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, SkipValidation, WithJsonSchema, create_model
from pydantic.json_schema import models_json_schema

from memnets.argerrors import ArgumentTypeError
from memnets.memory.fields import ARGUMENTS, CALLS, Argument
from memnets.server.routes.answers import ANSWERS
from memnets.server.wire import arguments_from_json


class ArgumentsBody(BaseModel):
    """A JSON object whose fields are an API call's keyword arguments (an extra field is kept to be refused by name)."""

    model_config = ConfigDict(extra="allow")
    typed: ClassVar[tuple[type[BaseModel], ...]] = ()  # what the OpenAPI document says the body is

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        if not cls.typed:
            return handler(core_schema)
        refs = [{"$ref": REF.format(model=body.__name__)} for body in cls.typed]  # add_schemas puts them there
        return refs[0] if len(refs) == 1 else {"oneOf": refs}

    def arguments(self) -> dict[str, Any]:
        """The fields the client sent, as the API call's keyword arguments (times parsed); a field that no call of
        the route takes is refused naming it (a TypeError, as the call refuses an unknown keyword argument: it had
        reached the call, whose refusal named no field and, for a search, another call)."""
        unknown = sorted(self.__pydantic_extra__ or {})
        if unknown:
            takes = ", ".join(type(self).model_fields)
            raise ArgumentTypeError(f"unknown field {unknown[0]!r}: this request takes {takes}", field=unknown[0])
        return arguments_from_json(
            {name: value for name, value in self.__dict__.items() if name in self.model_fields_set}
        )


REF = "#/components/schemas/{model}"  # where the OpenAPI document keeps a named schema
TYPED_BODIES: list[type[BaseModel]] = []  # every typed body made, for the OpenAPI document


def add_schemas(document: dict[str, Any]) -> None:
    """Put the typed bodies and the answers (:mod:`memnets.server.routes.answers`), with the schemas they
    refer to (Memory, ChatMessage, ...), into the OpenAPI ``document``'s components, where the routes refer
    to them: made in one pass, so that a type bodies and answers share has one name per form (pydantic's
    ``-Input``/``-Output`` where its two forms differ)."""
    modes = [(body, "validation") for body in TYPED_BODIES] + [(answer, "serialization") for answer in ANSWERS]
    _, found = models_json_schema(modes, ref_template=REF)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in found.get("$defs", {}).items():
        if schemas.setdefault(name, schema) != schema:
            raise RuntimeError(f"the OpenAPI document names two schemas {name!r}: {schemas[name]} and {schema}")
    document["components"]["schemas"] = dict(sorted(schemas.items()))


def _wire_schema(argument: Argument):
    """The JSON schema of a field as pydantic makes it from the type, with the argument's bounds and no
    ``default`` (a field left out is the API's default, which the document does not restate)."""

    def adjust(schema: dict[str, Any]) -> None:
        schema.pop("default", None)
        schema.update(argument.bounds or {})

    return adjust


def typed_field(name: str, required: bool) -> tuple[Any, Any]:
    """A model field of argument ``name`` (:data:`~memnets.memory.fields.ARGUMENTS`): its wire type in the
    schema, its value unchecked (``SkipValidation``: the API checks it)."""
    argument = ARGUMENTS[name]
    typed = SkipValidation[argument.type]
    if argument.schema is not None:
        typed = Annotated[typed, WithJsonSchema(dict(argument.schema))]
    info = Field(description=argument.description, json_schema_extra=_wire_schema(argument))
    return Annotated[typed, info], ... if required else None


def typed_body(name: str, call: str, doc: str) -> type[BaseModel]:
    """The typed model of call ``call``'s body (:data:`~memnets.memory.fields.CALLS`), named ``name`` in the
    OpenAPI document; a field it does not take is refused (``additionalProperties: false``)."""
    spec = CALLS[call]
    fields = {argument: typed_field(argument, argument in spec.needs) for argument in spec.takes}
    config = ConfigDict(extra="forbid")
    model = create_model(name, __config__=config, __doc__=doc, **fields)
    TYPED_BODIES.append(model)
    return model


def arguments_body(name: str, bodies: Sequence[type[BaseModel]], needs: Sequence[str]) -> type[ArgumentsBody]:
    """The model a route reads its body with: the fields of ``bodies`` unchecked, ``needs`` required (a
    missing one is FastAPI's 422 naming it), others passed through; in the OpenAPI document it is the
    typed body, or one of them (``oneOf``)."""
    names = dict.fromkeys(field for body in bodies for field in body.model_fields)
    fields = {field: (Any, ...) if field in needs else (Any, None) for field in names}
    model = create_model(name, __base__=ArgumentsBody, **fields)
    model.typed = tuple(bodies)
    return model


def answer(content: dict[str, Any]) -> JSONResponse:
    """The JSON answer of a route whose ``content`` :func:`~memnets.server.wire.to_json` made JSON-ready:
    a response, so that FastAPI does not walk it again (its ``jsonable_encoder`` took ~240 us for a search
    of 5 hits, more than to_json itself). The same bytes as returning ``content``."""
    return JSONResponse(content)
