/**
 * The server's errors as exceptions. Every error answer of a memnets server is
 * `{"error": {"code", "message", "field", "type"}}` (memnets/server/errors.py); the client throws
 * the class of its `code`, so callers catch by kind and read `code`, `field` and `status`.
 */

/** The codes of memnets/server/wire.py's ERROR_STATUS. */
export type ErrorCode =
  | "invalid_argument"
  | "invalid_type"
  | "invalid_memory"
  | "malformed_request"
  | "not_found"
  | "unauthorized"
  | "forbidden"
  | "too_large"
  | "conflict"
  | "unavailable"
  | "not_ready"
  | "insufficient_storage"
  | "internal";

/** What the server said about an error (or the client, for one refused before any request). */
export interface ErrorDetail {
  /** HTTP status; null when the client refused the call before sending it. */
  status: number | null;
  code: ErrorCode | null;
  /** The argument the message names (`"user"`, `"filters"`, ...), when it names one. */
  field?: string | null;
  /** The Python exception the embedded API raised for the same input (`"ValueError"`, `"KeyError"`, ...). */
  type?: string | null;
}

/** Any error of a memnets server or of this client. */
export class MemnetsError extends Error {
  readonly status: number | null;
  readonly code: ErrorCode | null;
  readonly field: string | null;
  readonly type: string | null;

  constructor(message: string, detail: ErrorDetail) {
    super(message);
    this.name = new.target.name;
    this.status = detail.status;
    this.code = detail.code;
    this.field = detail.field ?? null;
    this.type = detail.type ?? null;
  }
}

/** A value out of range, an unknown filter field (the API's ValueError). */
export class InvalidArgumentError extends MemnetsError {}
/** A value of the wrong type (the API's TypeError). */
export class InvalidTypeError extends MemnetsError {}
/** A text the store cannot hold: empty, not valid Unicode, too long for the encoder's tokenizer. */
export class InvalidMemoryError extends MemnetsError {}
/** No such memory of this user, or no such route (the API's KeyError). */
export class NotFoundError extends MemnetsError {}
/** No token, a wrong token, or a token scoped to another user, agent or session. */
export class PermissionDeniedError extends MemnetsError {}
/** The server or its store cannot be reached now, or did not answer in time; `retryAfter` in seconds. */
export class ServerUnavailableError extends MemnetsError {
  readonly retryAfter: number | null;

  constructor(message: string, detail: ErrorDetail, retryAfter: number | null = null) {
    super(message, detail);
    this.retryAfter = retryAfter;
  }
}
/** Any other error answer: a malformed request, a body too large, a conflict, the store's disk full, an internal error. */
export class ServerError extends MemnetsError {}

const CLASS_OF_CODE: Record<ErrorCode, typeof MemnetsError> = {
  invalid_argument: InvalidArgumentError,
  invalid_type: InvalidTypeError,
  invalid_memory: InvalidMemoryError,
  malformed_request: ServerError,
  not_found: NotFoundError,
  unauthorized: PermissionDeniedError,
  forbidden: PermissionDeniedError,
  too_large: ServerError,
  conflict: ServerError,
  unavailable: ServerUnavailableError,
  not_ready: ServerUnavailableError,
  insufficient_storage: ServerError,
  internal: ServerError,
};

// the code of an error answer without the JSON shape (a proxy's page, an older server's door guard)
const CODE_OF_STATUS: Record<number, ErrorCode> = {
  400: "malformed_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  413: "too_large",
  422: "invalid_argument",
  500: "internal",
  503: "unavailable",
  507: "insufficient_storage",
};

// Python's names of types as a JavaScript caller knows them
const JS_TYPE: Record<string, string> = {
  NoneType: "null",
  str: "a string",
  int: "an integer",
  float: "a number",
  bool: "a boolean",
  dict: "an object",
  list: "an array",
  tuple: "an array",
};

/**
 * The server's message in this client's words. The server answers in the words of the Python API behind
 * it, which a caller of this client never wrote: `AgentMemory.add() got an unexpected keyword argument
 * 'bogus'` is `unknown option "bogus"`, `got NoneType` is `got null`, `must be a str` is `must be a
 * string`, and a record's `Memory '<id>': ` prefix goes.
 */
export function inClientWords(message: string): string {
  return message
    .replace(/\b[\w.]+\(\) got an unexpected keyword argument '([^']+)'/g, 'unknown option "$1"')
    .replace(/\bMemory '[^']*': /g, "")
    .replace(
      /\b(got|must be) (?:an? )?(NoneType|str|int|float|bool|dict|list|tuple)\b/g,
      (_, verb, type) => `${verb} ${JS_TYPE[type]}`,
    )
    .replace(/\ba datetime \(on the wire an ISO 8601 string\)/g, "an ISO 8601 string or a Date");
}

/** The exception of an error answer: its status, its body's text and its Retry-After header. */
export function errorFromResponse(status: number, body: string, retryAfterHeader: string | null): MemnetsError {
  let error: { code?: unknown; message?: unknown; field?: unknown; type?: unknown } | null = null;
  try {
    const parsed = JSON.parse(body);
    if (parsed && typeof parsed.error === "object" && parsed.error !== null) error = parsed.error;
    else if (parsed && typeof parsed.error === "string") error = { message: parsed.error };
  } catch {
    // not JSON: the body's text is the message
  }
  const code = (
    typeof error?.code === "string" && error.code in CLASS_OF_CODE ? error.code : CODE_OF_STATUS[status]
  ) as ErrorCode | undefined;
  const message = typeof error?.message === "string" ? inClientWords(error.message) : body.slice(0, 500);
  const detail: ErrorDetail = {
    status,
    code: code ?? null,
    field: typeof error?.field === "string" ? error.field : null,
    type: typeof error?.type === "string" ? error.type : null,
  };
  const text = `${status} ${code ?? "error"}: ${message}`;
  const Class = code ? CLASS_OF_CODE[code] : ServerError;
  if (Class === ServerUnavailableError) {
    const seconds = retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader) ? Number(retryAfterHeader) : null;
    return new ServerUnavailableError(text, detail, seconds);
  }
  return new Class(text, detail);
}
