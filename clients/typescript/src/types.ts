/**
 * What the server's routes take and answer, all of it from the server's OpenAPI document: `schema.ts` is
 * generated from openapi.json by `npm run gen` (openapi-typescript) and checked in; openapi.json is what
 * the server serves, made from memnets' one model of a call's arguments (memnets/memory/fields.py) and
 * its answers (memnets/server/routes/answers.py). tests/server/test_ts_client.py fails when either file differs
 * from what its generator makes. Here the bodies become the methods' options: times may be `Date`s, and
 * the argument a method takes on its own (the text, the query, the messages) is left out.
 */

import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

/** A route of the server. */
export type Route = keyof paths;

/** The HTTP methods a route answers. */
export type MethodOf<R extends Route> = {
  [M in "get" | "post" | "patch" | "delete"]: paths[R][M] extends { parameters: unknown } ? M : never;
}["get" | "post" | "patch" | "delete"];

/** The query parameters of a route's method, as the server declares them. */
export type QueryOf<R extends Route, M extends MethodOf<R>> = paths[R][M] extends { parameters: { query?: infer Q } }
  ? NonNullable<Q>
  : never;

/** A time argument: an ISO 8601 string or a Date (sent as its ISO 8601 string). */
export type Time = string | Date;

/** The names of the time fields (`format: date-time` in the document). */
type TimeName = "t" | "time" | "now" | "since" | "until" | "as_of" | "known_at" | "valid_from" | "valid_to";

/** `T` with a `Date` allowed wherever a time is (its other types, such as null, kept). */
type Timed<T> = { [K in keyof T]: K extends TimeName ? Time | Exclude<T[K], string> : T[K] };

/** One memory as the server stores it (memnets.records.Memory); `outcome` is set on what a write answers. */
export type Memory = Schemas["Memory-Output"];

/** The parts behind a hit's score (`learned`: null when ranked by cosine). */
export type ScoreParts = Schemas["ScoreParts"];

/** One search result: the memory, its score and the score's parts. */
export type SearchHit = Schemas["Hit"];

/** The whole answer of a search: the hits, the ranker ("cosine" or "learned") and a learned ranker's weights. */
export type SearchAnswer = Schemas["SearchAnswer"];

/**
 * Search and list filters (docs/memory.md, "Filters"): `kind` (one or a list), `metadata` (field ->
 * value or `{"$gt": ...}`-style operators), `agent`, `session`, `since`, `until`, `$and` / `$or`.
 */
export type Filters = Timed<NonNullable<Schemas["Search"]["filters"]>>;

/** The fields of a new memory, besides its text (AgentMemory.add's keyword arguments). */
export type MemoryFields = Timed<Omit<Schemas["AddText"], "user" | "text" | "id" | "replaces">>;

/** AgentMemory.add's arguments. */
export type AddOptions = Timed<Omit<Schemas["AddText"], "text">>;

/** AgentMemory.add_many's arguments (`ids` aligned with the texts). */
export type AddManyOptions = Timed<Omit<Schemas["AddItems"], "items">>;

/** One message of a chat transcript, for {@link MemnetsClient.addMessages}. */
export type Message = Timed<Schemas["ChatMessage"]>;

/** A part of a message's content: a text, `{type: "text", text}`, or another part (left out by the server). */
export type MessagePart = Exclude<NonNullable<Schemas["ChatMessage"]["content"]>, string>[number];

/** AgentMemory.add_messages' arguments (docs/memory.md, "Messages"). */
export type AddMessagesOptions = Timed<Omit<Schemas["AddMessages"], "messages">>;

/** What adding one message did: its memory as stored, or "skipped" with the reason. */
export type MessageOutcome = Schemas["MessageOutcome"];

/** AgentMemory.update's arguments: a new text and/or metadata, ttl, validity. */
export type UpdateOptions = Timed<Schemas["Update"]>;

/** AgentMemory.search's arguments. */
export type SearchOptions = Timed<Omit<Schemas["Search"], "query">>;

/** Reads at a time (docs/memory.md, "Time"): the versions valid at `as_of`, as written by `known_at`. */
export type AtTime = Pick<SearchOptions, "as_of" | "known_at">;

/** AgentMemory.search_many's arguments. */
export type SearchManyOptions = Timed<Omit<Schemas["SearchMany"], "query">>;

/** AgentMemory.list_memories' arguments (`limit: null`: every page, fetched in turn). */
export type ListOptions = Timed<Omit<QueryOf<"/v1/memories", "get">, "limit" | "filters">> & {
  limit?: number | null;
  filters?: Filters;
};

/** AgentMemory.delete_all's scope: one user, and maybe one agent and/or session of it. */
export type DeleteAllOptions = QueryOf<"/v1/memories", "delete">;

/** MemoryManager.observe's arguments besides the text. */
export type ObserveOptions = Timed<Omit<Schemas["Observe"], "text">>;

/** MemoryManager.context_for's arguments besides the query. */
export type ContextOptions = Timed<Omit<Schemas["Context"], "query">>;

/** The recall gate's verdict and what goes into the prompt (MemoryManager.context_for). */
export type ContextView = Schemas["ContextView"];

/** What this server process's manager of a user holds in each tier, and the gate's last decisions. */
export type ManagerSnapshot = Schemas["ManagerSnapshot"];

/** What the request's token reaches. */
export type WhoAmI = Schemas["WhoAmI"];
