/** memnets-client: the TypeScript client of a memnets server (`memnets serve http`). */

export { DEFAULT_TIMEOUT_MS, MemnetsClient, type ClientOptions } from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
export type { components, paths } from "./schema.js";
