/**
 * `MemnetsClient`: memnets.Client (memnets/server/client.py) for TypeScript, over a memnets server's
 * REST routes (`memnets serve http`). Each method takes the arguments of its AgentMemory namesake
 * (camelCase: `addMany`, `deleteAll`, `listMemories`) and answers what the server answers; errors are
 * thrown as the class of the server's error code (errors.ts). Global fetch (node >= 18, browsers),
 * no runtime dependencies.
 */

import { checkOptions, refused, shown } from "./arguments.js";
import {
  InvalidArgumentError,
  InvalidTypeError,
  NotFoundError,
  ServerUnavailableError,
  errorFromResponse,
} from "./errors.js";
import type {
  AddManyOptions,
  AddMessagesOptions,
  AddOptions,
  ContextOptions,
  ContextView,
  DeleteAllOptions,
  ListOptions,
  ManagerSnapshot,
  Memory,
  Message,
  MessageOutcome,
  ObserveOptions,
  QueryOf,
  SearchAnswer,
  SearchHit,
  SearchManyOptions,
  SearchOptions,
  UpdateOptions,
  WhoAmI,
} from "./types.js";

/** How long a call waits for its answer unless told otherwise: 60 s, as memnets.Client. */
export const DEFAULT_TIMEOUT_MS = 60_000;
const PAGE = 1000; // memories per page when listing every page

export interface ClientOptions {
  /** A bearer token: the admin token, or one scoped to a user (and maybe an agent or session). */
  token?: string;
  /** Milliseconds to wait for each answer; past it the call throws ServerUnavailableError. */
  timeoutMs?: number;
  /** The fetch to use (a proxy's, a test's); default: the global fetch. */
  fetch?: typeof fetch;
}

/** A memnets server's memory, with AgentMemory's methods. */
export class MemnetsClient {
  readonly url: string;
  readonly timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;

  constructor(url: string, options: ClientOptions = {}) {
    if (typeof url !== "string" || !/^https?:\/\//.test(url)) {
      throw new InvalidArgumentError(
        `MemnetsClient: url must be an http:// or https:// URL, got ${JSON.stringify(url)}`,
        refused("url", "invalid_argument"),
      );
    }
    const { token, timeoutMs = DEFAULT_TIMEOUT_MS } = options;
    if (token !== undefined && (typeof token !== "string" || !token.trim())) {
      throw new InvalidArgumentError(
        "MemnetsClient: token must be a non-empty string or undefined",
        refused("token", "invalid_argument"),
      );
    }
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new InvalidArgumentError(
        `MemnetsClient: timeoutMs must be a positive number, got ${timeoutMs}`,
        refused("timeoutMs", "invalid_argument"),
      );
    }
    this.url = url.replace(/\/+$/, "");
    this.timeoutMs = timeoutMs;
    this.#headers = token === undefined ? {} : { Authorization: `Bearer ${token}` };
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  // ------------------------------------------------------------------ writing
  /** AgentMemory.add: one memory of `options.user`, durable when this resolves; its `outcome` says what the add did. */
  async add(text: string, options: AddOptions): Promise<Memory> {
    requireText(text, "text");
    checkOptions("add", options);
    const { memory } = await this.#call<{ memory: Memory }>("POST", "/v1/memories", { ...options, text });
    return memory;
  }

  /** AgentMemory.add_many: many memories in one request and one encoder batch, in order. */
  async addMany(texts: string[], options: AddManyOptions): Promise<Memory[]> {
    if (!Array.isArray(texts)) {
      throw new InvalidTypeError(
        `addMany: texts must be an array of texts, not a single ${typeof texts}`,
        refused("items", "invalid_type"),
      );
    }
    const notText = texts.findIndex((text) => typeof text !== "string");
    if (notText >= 0) {
      throw new InvalidTypeError(
        `addMany: texts[${notText}] must be a string, got ${shown(texts[notText])}`,
        refused("items", "invalid_type"),
      );
    }
    checkOptions("addMany", options);
    const { memories } = await this.#call<{ memories: Memory[] }>("POST", "/v1/memories", { ...options, items: texts });
    return memories;
  }

  /**
   * AgentMemory.add of a chat transcript (docs/memory.md, "Messages"): one memory per kept message,
   * `"{speaker}: {text}"`, with its role and speaker as metadata; one outcome per message, in order.
   */
  async addMessages(messages: Message[], options: AddMessagesOptions): Promise<MessageOutcome[]> {
    if (!Array.isArray(messages)) {
      throw new InvalidTypeError(
        "addMessages: messages must be an array of {role, content} objects",
        refused("messages", "invalid_type"),
      );
    }
    checkOptions("addMessages", options);
    const { outcomes } = await this.#call<{ outcomes: MessageOutcome[] }>("POST", "/v1/memories", {
      ...options,
      messages,
    });
    return outcomes;
  }

  /** AgentMemory.update: a new version (text and/or metadata); the old one stays in the history. */
  async update(id: string, options: UpdateOptions): Promise<Memory> {
    checkOptions("update", options);
    const { memory } = await this.#call<{ memory: Memory }>("PATCH", `/v1/memories/${segment(id)}`, options);
    return memory;
  }

  // ------------------------------------------------------------------ reading
  /** AgentMemory.search: the k best memories of the user, best first, each with its score and its parts. */
  async search(query: string, options: SearchOptions): Promise<SearchHit[]> {
    return (await this.searchExplained(query, options)).results;
  }

  /** The server's whole search answer: the hits, the ranker and a learned ranker's weights. */
  async searchExplained(query: string, options: SearchOptions): Promise<SearchAnswer> {
    requireText(query, "query");
    checkOptions("search", options);
    return this.#call<SearchAnswer>("POST", "/v1/search", { k: 5, ...options, query });
  }

  /** AgentMemory.search_many: `{user: hits}`, the query encoded once. */
  async searchMany(query: string, options: SearchManyOptions): Promise<Record<string, SearchHit[]>> {
    requireText(query, "query");
    checkOptions("searchMany", options);
    if (options.users === undefined) {
      throw new InvalidArgumentError("searchMany: the users option is required", refused("users", "invalid_argument"));
    }
    const { by_user } = await this.#call<{ by_user: Record<string, SearchHit[]> }>("POST", "/v1/search", {
      k: 5,
      ...options,
      query,
    });
    return by_user;
  }

  /** AgentMemory.get: the memory, or null when the user has none with this id. */
  async get(id: string, options: { user: string }): Promise<Memory | null> {
    checkOptions("get", options);
    try {
      const query: QueryOf<"/v1/memories/{id}", "get"> = { user: options.user };
      return (await this.#call<{ memory: Memory }>("GET", `/v1/memories/${segment(id)}`, undefined, query)).memory;
    } catch (error) {
      if (error instanceof NotFoundError) return null;
      throw error;
    }
  }

  /** AgentMemory.history: every version, oldest first, the current one last. */
  async history(id: string, options: { user: string }): Promise<Memory[]> {
    checkOptions("history", options);
    const query: QueryOf<"/v1/memories/{id}/history", "get"> = { user: options.user };
    return (await this.#call<{ memories: Memory[] }>("GET", `/v1/memories/${segment(id)}/history`, undefined, query))
      .memories;
  }

  /** AgentMemory.list_memories: one page by (t, id); `limit: null` fetches every page in turn. */
  async listMemories(options: ListOptions): Promise<Memory[]> {
    checkOptions("listMemories", options);
    const { user, limit = 100, offset = 0, filters, as_of, known_at } = options;
    const query: QueryOf<"/v1/memories", "get"> = { user, offset, limit: limit ?? PAGE };
    if (filters !== undefined) query.filters = JSON.stringify(toJson(filters, ["filters"]));
    if (as_of !== undefined) query.as_of = toJson(as_of) as string;
    if (known_at !== undefined) query.known_at = toJson(known_at) as string;
    const out: Memory[] = [];
    for (;;) {
      const page = await this.#call<{ memories: Memory[]; next_offset: number | null }>(
        "GET",
        "/v1/memories",
        undefined,
        query,
      );
      out.push(...page.memories);
      if (limit !== null || page.next_offset === null) return out;
      query.offset = page.next_offset;
    }
  }

  /** AgentMemory.users (a scoped token sees its own user only). */
  async users(): Promise<string[]> {
    return (await this.#call<{ users: string[] }>("GET", "/v1/users")).users;
  }

  /** What this client's token reaches. */
  async whoami(): Promise<WhoAmI> {
    return this.#call<WhoAmI>("GET", "/v1/whoami");
  }

  // ------------------------------------------------------------------ forgetting
  /** AgentMemory.delete: the memory, its older versions and what was derived from it; true if anything held it. */
  async delete(id: string, options: { user: string }): Promise<boolean> {
    checkOptions("delete", options);
    const query: QueryOf<"/v1/memories/{id}", "delete"> = { user: options.user };
    return Boolean(
      (await this.#call<{ deleted: boolean }>("DELETE", `/v1/memories/${segment(id)}`, undefined, query)).deleted,
    );
  }

  /** AgentMemory.delete_all of one user (and maybe one agent and/or session of it): how many current memories went. */
  async deleteAll(options: DeleteAllOptions): Promise<number> {
    checkOptions("deleteAll", options);
    return (await this.#call<{ deleted: number }>("DELETE", "/v1/memories", undefined, options)).deleted;
  }

  // ------------------------------------------------------------------ the server's manager of a user
  /** MemoryManager.observe: the message enters the user's context; kept ones are written through. */
  async observe(user: string, text: string, options: ObserveOptions = {}): Promise<Memory> {
    requireText(text, "text");
    checkOptions("observe", options);
    return (
      await this.#call<{ memory: Memory }>("POST", `/v1/users/${segment(user, "user")}/observe`, { ...options, text })
    ).memory;
  }

  /** MemoryManager.context_for: the recall gate's verdict and the memories for the prompt. */
  async context(user: string, query: string, options: ContextOptions = {}): Promise<ContextView> {
    requireText(query, "query");
    checkOptions("context", options);
    return this.#call<ContextView>("POST", `/v1/users/${segment(user, "user")}/context`, { ...options, query });
  }

  /** What the server's manager of `user` holds in each tier, and the recall gate's last decisions. */
  async manager(user: string): Promise<ManagerSnapshot> {
    return this.#call<ManagerSnapshot>("GET", `/v1/users/${segment(user, "user")}/manager`);
  }

  // ------------------------------------------------------------------ health
  /** Whether the server is ready: its memory open and its store answering (false while it loads). */
  async ready(): Promise<boolean> {
    try {
      await this.#call("GET", "/readyz");
      return true;
    } catch (error) {
      if (error instanceof ServerUnavailableError) return false;
      throw error;
    }
  }

  // ------------------------------------------------------------------ transport
  async #call<T>(
    method: "GET" | "POST" | "PATCH" | "DELETE",
    path: string,
    body?: unknown,
    query?: Record<string, string | number | null | undefined>,
  ): Promise<T> {
    const url = new URL(this.url + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== null && value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = { ...this.#headers, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const payload = body === undefined ? undefined : JSON.stringify(toJson(body)); // refused before any request
    let response: Response;
    try {
      response = await this.#fetch(url, {
        method,
        headers,
        body: payload,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const why =
        error instanceof Error && error.name === "TimeoutError"
          ? `no answer within ${this.timeoutMs} ms`
          : String(error);
      throw new ServerUnavailableError(`${method} ${this.url}${path}: ${why}`, { status: null, code: null });
    }
    const text = await response.text();
    if (!response.ok) throw errorFromResponse(response.status, text, response.headers.get("retry-after"));
    return JSON.parse(text) as T;
  }
}

function requireText(value: unknown, name: string): void {
  if (typeof value !== "string") {
    throw new InvalidTypeError(
      `${name} must be a string, got ${value === null ? "null" : typeof value}`,
      refused(name, "invalid_type"),
    );
  }
}

/**
 * An id (or user) as one URL path segment. "." and ".." are refused here: URLs drop such dot
 * segments (percent-encoded too), so `DELETE /v1/memories/.` would go out as `DELETE /v1/memories`,
 * the delete of every memory of the user.
 */
function segment(value: unknown, name = "id"): string {
  if (typeof value !== "string") {
    throw new InvalidTypeError(`${name} must be a string, got ${typeof value}`, refused(name, "invalid_type"));
  }
  if (value === "" || value === "." || value === "..") {
    throw new InvalidArgumentError(
      `${name}=${JSON.stringify(value)} is not a valid ${name}`,
      refused(name, "invalid_argument"),
    );
  }
  return encodeURIComponent(value);
}

/**
 * A value as JSON: Dates as ISO 8601 strings, everything else as it is; a number that is not finite (NaN,
 * Infinity) is an InvalidArgumentError naming its place, as the server refuses it: JSON.stringify would send
 * it as null, stored without a word. `path`: the value's place, its first key the field named.
 */
function toJson(value: unknown, path: (string | number)[] = []): unknown {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "number" && !Number.isFinite(value)) {
    const [field, ...rest] = path.map(String);
    const place = `${field ?? "value"}${rest.map((key) => `[${JSON.stringify(key)}]`).join("")}`;
    throw new InvalidArgumentError(
      `${place} is ${value}: JSON numbers must be finite (no NaN or Infinity)`,
      refused(field ?? "value", "invalid_argument"),
    );
  }
  if (Array.isArray(value)) return value.map((item, n) => toJson(item, [...path, n]));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, toJson(v, [...path, k])]),
    );
  }
  return value;
}
