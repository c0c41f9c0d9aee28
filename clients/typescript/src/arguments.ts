/**
 * The options of each method, checked in the client before any request, in the client's own words.
 *
 * Without these checks the server refused a mistyped option or a wrong value in the words of the
 * Python API behind it (`AgentMemory.add() got an unexpected keyword argument 'bogus'`, `got
 * NoneType`). Each method's option names are listed here once; `optionNames` fails to compile when
 * a list misses a name of its options type (types.ts), so the lists cannot drift from the types.
 */

import { type ErrorDetail, InvalidArgumentError, InvalidTypeError } from "./errors.js";
import type {
  AddManyOptions,
  AddMessagesOptions,
  AddOptions,
  ContextOptions,
  DeleteAllOptions,
  ListOptions,
  ObserveOptions,
  SearchManyOptions,
  SearchOptions,
  UpdateOptions,
} from "./types.js";

/** `names` when it holds every key of T (checked when compiled), else a type error naming the missing ones. */
type Every<T, N extends readonly string[]> = [Exclude<keyof T, N[number]>] extends [never]
  ? N
  : { missing: Exclude<keyof T, N[number]> };

function optionNames<T>() {
  return <const N extends readonly (keyof T & string)[]>(names: N & Every<T, N>): readonly string[] => names;
}

/** A new memory's fields besides its text (MemoryFields): add and addMany take them. */
const FIELDS = [
  "t",
  "kind",
  "metadata",
  "importance",
  "agent",
  "action",
  "objects",
  "location",
  "session",
  "ttl",
] as const;
const SEARCH = ["k", "filters", "refresh_ttl", "as_of", "known_at"] as const;

/** The option names of each method that takes an options object. */
export const OPTIONS: Record<string, readonly string[]> = {
  add: optionNames<AddOptions>()(["user", "id", "replaces", ...FIELDS]),
  addMany: optionNames<AddManyOptions>()(["user", "ids", ...FIELDS]),
  addMessages: optionNames<AddMessagesOptions>()([
    "user",
    "session",
    "agent",
    "keep",
    "roles",
    "t",
    "kind",
    "metadata",
    "importance",
    "ttl",
  ]),
  update: optionNames<UpdateOptions>()([
    "user",
    "text",
    "metadata",
    "merge_metadata",
    "t",
    "ttl",
    "valid_from",
    "valid_to",
  ]),
  search: optionNames<SearchOptions>()(["user", ...SEARCH]),
  searchMany: optionNames<SearchManyOptions>()(["users", ...SEARCH]),
  listMemories: optionNames<ListOptions>()(["user", "limit", "offset", "filters", "as_of", "known_at"]),
  get: ["user"],
  history: ["user"],
  delete: ["user"],
  deleteAll: optionNames<DeleteAllOptions>()(["user", "agent", "session"]),
  observe: optionNames<ObserveOptions>()([
    "t",
    "id",
    "kind",
    "speaker",
    "importance",
    "metadata",
    "action",
    "objects",
    "location",
  ]),
  context: optionNames<ContextOptions>()(["k", "now"]),
};

/** A value as a message shows it: `null`, `"text"`, `42`, `an array`, `an object`. */
export function shown(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  if (value instanceof Date) return "a Date";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? value.slice(0, 39) + "…" : value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return `a ${typeof value}`;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Date);
const isTime = (value: unknown) => typeof value === "string" || (value instanceof Date && !isNaN(value.getTime()));
const isStrings = (value: unknown) => Array.isArray(value) && value.every((item) => typeof item === "string");
const TYPES = {
  string: (value: unknown) => typeof value === "string",
  number: (value: unknown) => typeof value === "number",
  boolean: (value: unknown) => typeof value === "boolean",
  array: Array.isArray,
  object: isObject,
  time: isTime,
};
const nonEmpty = (value: unknown) => (value as string).trim() !== "";
const atLeast = (least: number) => (value: unknown) => Number.isInteger(value) && (value as number) >= least;

/**
 * What each option must be: its type (a value of another type is an InvalidTypeError, as the server's
 * TypeError), a check of the value (else an InvalidArgumentError), and both in words.
 */
const RULES: Record<
  string,
  [keyof typeof TYPES | "time or null" | "number or null", (value: unknown) => boolean, string]
> = {
  user: ["string", nonEmpty, "a non-empty string"],
  users: ["array", (v) => isStrings(v) && (v as string[]).length > 0, "a non-empty array of user ids"],
  id: ["string", nonEmpty, "a non-empty string"],
  replaces: ["string", nonEmpty, "a non-empty string (a memory id)"],
  ids: [
    "array",
    (v) => (v as unknown[]).every((id) => id === null || typeof id === "string"),
    "an array of ids or nulls",
  ],
  text: ["string", nonEmpty, "a non-empty string"],
  kind: ["string", () => true, "a string (observation, reflection, plan, summary or message)"],
  metadata: ["object", () => true, "an object of fields"],
  importance: ["number", (v) => (v as number) >= 0 && (v as number) <= 1, "a number in [0, 1]"],
  ttl: ["number", (v) => (v as number) > 0, "a positive number of seconds"],
  agent: ["string", nonEmpty, "a non-empty string"],
  session: ["string", nonEmpty, "a non-empty string"],
  action: ["string", () => true, "a string"],
  location: ["string", () => true, "a string"],
  objects: ["array", isStrings, "an array of strings"],
  roles: ["array", isStrings, "an array of strings"],
  keep: ["string", (v) => v === "all" || v === "important", '"all" or "important"'],
  k: ["number", atLeast(1), "an integer of at least 1"],
  limit: ["number or null", (v) => v === null || atLeast(0)(v), "an integer of at least 0, or null (every page)"],
  offset: ["number", atLeast(0), "an integer of at least 0"],
  filters: ["object", () => true, "an object of conditions (docs/memory.md, Filters)"],
  refresh_ttl: ["boolean", () => true, "true or false"],
  merge_metadata: ["boolean", () => true, "true or false"],
  speaker: ["string", nonEmpty, "a non-empty string"],
  t: ["time", () => true, "an ISO 8601 string or a Date"],
  now: ["time", () => true, "an ISO 8601 string or a Date"],
  as_of: ["time", () => true, "an ISO 8601 string or a Date"],
  known_at: ["time", () => true, "an ISO 8601 string or a Date"],
  valid_from: ["time", () => true, "an ISO 8601 string or a Date"],
  valid_to: ["time or null", () => true, "an ISO 8601 string, a Date or null (reopen)"],
};

function ofType(type: (typeof RULES)[string][0], value: unknown): boolean {
  if (type === "time or null") return value === null || isTime(value);
  if (type === "number or null") return value === null || typeof value === "number";
  return TYPES[type](value);
}

/** The detail of an argument refused before any request: the server's code for it, and the Python exception. */
export function refused(field: string, code: "invalid_argument" | "invalid_type"): ErrorDetail {
  return { status: null, code, field, type: code === "invalid_type" ? "TypeError" : "ValueError" };
}

/**
 * `options` of `method` as the server would take them, or an InvalidArgumentError / InvalidTypeError
 * naming the option: not an object, an option the method does not take, a value that is not what the
 * option must be, a `user` left out where the method needs one. An option left undefined is left out.
 */
export function checkOptions(method: string, options: unknown, needsUser = true): void {
  if (!isObject(options)) {
    throw new InvalidTypeError(
      `${method}: options must be an object such as { user: "ann" }, got ${shown(options)}`,
      refused("options", "invalid_type"),
    );
  }
  const allowed = OPTIONS[method];
  for (const [name, value] of Object.entries(options)) {
    if (!allowed.includes(name)) {
      throw new InvalidArgumentError(
        `${method}: unknown option "${name}" (${method} takes ${allowed.join(", ")})`,
        refused(name, "invalid_argument"),
      );
    }
    if (value === undefined) continue;
    const [type, valid, words] = RULES[name];
    const typed = ofType(type, value);
    if (!typed || !valid(value)) {
      const [Class, code] = typed
        ? [InvalidArgumentError, "invalid_argument" as const]
        : [InvalidTypeError, "invalid_type" as const];
      throw new Class(`${method}: ${name} must be ${words}, got ${shown(value)}`, refused(name, code));
    }
  }
  if (needsUser && allowed.includes("user") && options.user === undefined) {
    throw new InvalidArgumentError(`${method}: the user option is required`, refused("user", "invalid_argument"));
  }
}
