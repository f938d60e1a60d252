/**
 * Typed client for memoryd (Node 20+, no runtime dependencies: the global `fetch`).
 *
 * Request and response types come from `./schema.ts`, generated from the gateway's OpenAPI
 * description (`npm run generate`), so the client follows the API. The methods and the
 * retry policy mirror the Python client (`shared/client/`).
 *
 *     import { MemorydClient } from "@memoryd/client";
 *     const memory = new MemorydClient("http://127.0.0.1:8420", process.env.MEMORYD_API_KEY);
 *     const job = await memory.addInteraction("u1", [{ role: "user", content: "I love hotpot" }]);
 *     await memory.wait(job.job_id);
 *     const { results } = await memory.search("u1", "what food do I like?");
 */

import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };
export type Schemas = components["schemas"];
export type Message = Schemas["Message"];
export type InteractionRequest = Schemas["InteractionRequest"];
export type SaveRequest = Schemas["SaveRequest"];
export type SaveResult = Schemas["SaveResult"];
export type UpdateRequest = Schemas["UpdateRequest"];
export type SearchRequest = Schemas["SearchRequest"];
export type SearchResponse = Schemas["SearchResponse"];
export type SearchHit = Schemas["SearchHit"];
export type ContextRequest = Schemas["ContextRequest"];
export type ContextResponse = Schemas["ContextResponse"];
export type MemoryView = Schemas["MemoryView"];
export type MemoryPage = Schemas["MemoryPage"];
export type MemoryHistory = Schemas["MemoryHistory"];
export type JobAccepted = Schemas["JobAccepted"];
export type JobView = Schemas["JobView"];
export type JobStatus = Schemas["JobStatus"];
export type ReindexRequest = Schemas["ReindexRequest"];
export type ErrorDetail = Schemas["ErrorDetail"];

type QueryOf<P extends keyof paths, M extends keyof paths[P]> =
  paths[P][M] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** `list()` filters: the query of `GET /v1/memories` but `user_id`. */
export type ListFilters = Omit<QueryOf<"/v1/memories", "get">, "user_id">;
/** `forget()` many: the query of `DELETE /v1/memories` but `user_id` and `wait`. */
export type ForgetRange = Omit<QueryOf<"/v1/memories", "delete">, "user_id" | "wait" | "before" | "after"> & {
  before?: Date | string | null;
  after?: Date | string | null;
};
export type InteractionOptions = Omit<InteractionRequest, "user_id" | "messages">;
export type SaveOptions = Omit<SaveRequest, "user_id" | "content"> & { wait?: number | null };
export type SearchOptions = Omit<SearchRequest, "user_id" | "query">;
export type ContextOptions = Omit<ContextRequest, "user_id" | "query">;
/** A change answered before the job ended: the job to follow (HTTP 202). */
export type ChangeResult = JobAccepted | Record<string, unknown>;

/**
 * Retries on 503 and 429 only: both say "try later" and mean nothing was done, so every
 * method is retried (writes too) except `ready()`, whose 503 is an answer. The delay is the
 * server's `Retry-After` when it sends one (capped at `maxRetryAfterMs`), else exponential
 * backoff with full jitter: a uniform draw in [0, min(maxMs, baseMs * 2^attempt)].
 * `attempts` counts the first request. A request that gets no answer at all is not retried.
 */
export interface RetryPolicy {
  attempts: number;
  baseMs: number;
  maxMs: number;
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  attempts: 4,
  baseMs: 250,
  maxMs: 8_000,
  maxRetryAfterMs: 30_000,
});

export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503]);
const FINAL_JOB_STATES: ReadonlySet<string> = new Set(["succeeded", "failed"]);

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date (a past date is 0); null
 * when absent or unreadable. */
export function retryAfterMs(value: string | null | undefined, now: number = Date.now()): number | null {
  if (!value) return null;
  const text = value.trim();
  if (text === "") return null;
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
    return Math.max(Number(text) * 1000, 0);
  }
  const when = Date.parse(text);
  if (Number.isNaN(when)) return null;
  return Math.max(when - now, 0);
}

/** How long to wait before retry number `attempt + 1` after `response`. */
export function retryDelayMs(policy: RetryPolicy, attempt: number, response: Response): number {
  const after = retryAfterMs(response.headers.get("retry-after"));
  if (after !== null) return Math.min(after, policy.maxRetryAfterMs);
  return Math.random() * Math.min(policy.maxMs, policy.baseMs * 2 ** attempt);
}

/**
 * Everything the client throws. `status`, `code`, `message` and `field` come from memoryd's
 * error body `{"error": {"code", "message", "field"}}`; an answer without one gets the code
 * `http_<status>`. `code` is "unreachable" when nothing answered (no `status`), and
 * "job_timeout" from `wait()` (a `JobTimeout`).
 */
export class MemorydError extends Error {
  readonly status: number | null;
  readonly code: string;
  readonly field: string | null;
  readonly requestId: string | null;

  constructor(message: string, options: {
    code?: string; status?: number | null; field?: string | null; requestId?: string | null;
    cause?: unknown;
  } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MemorydError";
    this.code = options.code ?? "client_error";
    this.status = options.status ?? null;
    this.field = options.field ?? null;
    this.requestId = options.requestId ?? null;
  }

  override toString(): string {
    const where = this.field ? ` (field ${this.field})` : "";
    return `${this.name}: ${this.code}: ${this.message}${where}`;
  }
}

/** `wait()` gave up before the job ended; `job` is the last state seen. */
export class JobTimeout extends MemorydError {
  readonly job: JobView;

  constructor(message: string, job: JobView) {
    super(message, { code: "job_timeout" });
    this.name = "JobTimeout";
    this.job = job;
  }
}

export interface ClientOptions {
  /** Per request, in milliseconds (each retry gets its own). Default 30 s. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

type QueryValue = string | number | boolean | Date | null | undefined | readonly (string | number)[];

interface Call {
  method: string;
  path: string;
  query?: Record<string, QueryValue>;
  json?: unknown;
  body?: string;
  contentType?: string;
  retry?: boolean;
}

export class MemorydClient {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, apiKey?: string | null, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.headers = { accept: "application/json", ...options.headers };
    if (apiKey) this.headers.authorization = `Bearer ${apiKey}`;
  }

  // ---- writes ---------------------------------------------------------------------

  /** Enqueue a finished interaction (`thread_id`, `extract`, `idempotency_key`, …). */
  addInteraction(userId: string, messages: Message[], fields: InteractionOptions = {}): Promise<JobAccepted> {
    return this.json({
      method: "POST", path: "/v1/interactions", json: { user_id: userId, messages, ...fields },
    });
  }

  /** Explicit save; with `wait` (seconds) the outcome (added / duplicate / updated) if it
   * came in time, else the job (HTTP 202). */
  async save(userId: string, content: string, options: SaveOptions = {}): Promise<SaveResult | JobAccepted> {
    const { wait, ...fields } = options;
    return this.json({
      method: "POST", path: "/v1/memories", query: { wait },
      json: { user_id: userId, content, ...fields },
    });
  }

  /** Change a memory: at least one of content, type, tags, importance, enabled, expires_at. */
  update(userId: string, memoryId: string, changes: UpdateRequest,
    options: { wait?: number | null } = {}): Promise<ChangeResult> {
    return this.json({
      method: "PATCH", path: `/v1/memories/${encodeURIComponent(memoryId)}`,
      query: { user_id: userId, wait: options.wait }, json: changes,
    });
  }

  /** One memory by id, or, with `memoryId` null, many by thread and/or `occurred_at`
   * range (or `all: true`). */
  forget(userId: string, memoryId: string | null = null, range: ForgetRange = {},
    options: { wait?: number | null } = {}): Promise<ChangeResult> {
    if (memoryId !== null) {
      if (Object.values(range).some((v) => v !== undefined && v !== null && v !== false)) {
        throw new MemorydError("forget one memory by id, or many by thread/time range, not both",
          { code: "client_error" });
      }
      return this.json({
        method: "DELETE", path: `/v1/memories/${encodeURIComponent(memoryId)}`,
        query: { user_id: userId, wait: options.wait },
      });
    }
    return this.json({
      method: "DELETE", path: "/v1/memories",
      query: { user_id: userId, ...range, wait: options.wait },
    });
  }

  /** Import records (the objects `export()` yields); a job. */
  importRecords(userId: string, records: Record<string, unknown>[],
    options: { idempotencyKey?: string } = {}): Promise<JobAccepted> {
    return this.json({
      method: "POST", path: "/v1/import", body: JSON.stringify(records),
      contentType: "application/json",
      query: { user_id: userId, idempotency_key: options.idempotencyKey },
    });
  }

  /** Re-embed the store (operator key). */
  reindex(body: ReindexRequest): Promise<JobAccepted> {
    return this.json({ method: "POST", path: "/v1/admin/reindex", json: body });
  }

  // ---- reads ----------------------------------------------------------------------

  search(userId: string, query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    return this.json({ method: "POST", path: "/v1/search", json: { user_id: userId, query, ...options } });
  }

  /** The memories for `query` packed into a prompt block within a token budget. */
  context(userId: string, query: string, options: ContextOptions = {}): Promise<ContextResponse> {
    return this.json({ method: "POST", path: "/v1/context", json: { user_id: userId, query, ...options } });
  }

  /** One page (`type`, `tag`, `scope`, `project`, `sort`, `limit`, `cursor`). */
  list(userId: string, filters: ListFilters = {}): Promise<MemoryPage> {
    return this.json({ method: "GET", path: "/v1/memories", query: { user_id: userId, ...filters } });
  }

  get(userId: string, memoryId: string): Promise<MemoryView> {
    return this.json({
      method: "GET", path: `/v1/memories/${encodeURIComponent(memoryId)}`, query: { user_id: userId },
    });
  }

  history(userId: string, memoryId: string): Promise<MemoryHistory> {
    return this.json({
      method: "GET", path: `/v1/memories/${encodeURIComponent(memoryId)}/history`,
      query: { user_id: userId },
    });
  }

  /** The user's memories, one record at a time (NDJSON, streamed). */
  async *export(userId: string): AsyncGenerator<Record<string, unknown>> {
    const response = await this.send({ method: "GET", path: "/v1/export", query: { user_id: userId } });
    await check(response);
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line) yield JSON.parse(line) as Record<string, unknown>;
      }
    }
    const rest = (buffered + decoder.decode()).trim();
    if (rest) yield JSON.parse(rest) as Record<string, unknown>;
  }

  // ---- jobs and operations ----------------------------------------------------------

  /** `operator`: a store-wide job (a re-embedding), read with an operator key. */
  job(jobId: string, options: { operator?: boolean } = {}): Promise<JobView> {
    const base = options.operator ? "/v1/admin/jobs/" : "/v1/jobs/";
    return this.json({ method: "GET", path: base + encodeURIComponent(jobId) });
  }

  /** The job once it succeeded or failed; `JobTimeout` if it has not by `timeoutMs`. */
  async wait(jobId: string, options: { timeoutMs?: number; pollMs?: number; operator?: boolean } = {}): Promise<JobView> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    let pollMs = options.pollMs ?? 50;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const view = await this.job(jobId, { operator: options.operator });
      if (FINAL_JOB_STATES.has(view.status)) return view;
      if (Date.now() >= deadline) {
        throw new JobTimeout(`job ${jobId} is still ${view.status} after ${timeoutMs / 1000} s`, view);
      }
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
      pollMs = Math.min(pollMs * 1.5, 1_000);
    }
  }

  /** The readiness report; a 503 (a part is down) is an answer here, never retried. */
  async ready(): Promise<Record<string, unknown>> {
    const response = await this.send({ method: "GET", path: "/readyz", retry: false });
    if (response.status === 200 || response.status === 503) {
      return (await response.json()) as Record<string, unknown>;
    }
    await check(response);
    return (await response.json()) as Record<string, unknown>;
  }

  // ---- transport --------------------------------------------------------------------

  private async json<T>(call: Call): Promise<T> {
    const response = await check(await this.send(call));
    return (await response.json()) as T;
  }

  private async send(call: Call): Promise<Response> {
    const url = this.baseUrl + call.path + queryString(call.query);
    const headers: Record<string, string> = { ...this.headers };
    let body: string | undefined = call.body;
    if (call.json !== undefined) {
      body = JSON.stringify(call.json);
      headers["content-type"] = "application/json";
    } else if (call.contentType) {
      headers["content-type"] = call.contentType;
    }
    for (let attempt = 0; ; attempt += 1) {
      let response: Response;
      try {
        response = await fetch(url, {
          method: call.method, headers, body, signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (cause) {
        throw new MemorydError(`memoryd is not reachable at ${this.baseUrl}: ${describe(cause)}`,
          { code: "unreachable", cause });
      }
      if (call.retry === false || !RETRY_STATUSES.has(response.status)
        || attempt + 1 >= this.retry.attempts) {
        return response;
      }
      await response.body?.cancel();
      await sleep(retryDelayMs(this.retry, attempt, response));
    }
  }
}

/** The response if it is a success; else its error body as a `MemorydError`. */
async function check(response: Response): Promise<Response> {
  if (response.status < 400) return response;
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = typeof body === "object" && body !== null
    ? (body as { error?: unknown }).error : undefined;
  const detail = typeof error === "object" && error !== null ? error as Partial<ErrorDetail> : {};
  throw new MemorydError(String(detail.message ?? `HTTP ${response.status}`), {
    status: response.status,
    code: String(detail.code ?? `http_${response.status}`),
    field: detail.field ?? null,
    requestId: response.headers.get("x-request-id"),
  });
}

/** Query parameters as the Python client sends them: null, undefined and false are left
 * out, true is "true", dates are ISO 8601, arrays repeat the name. */
function queryString(query: Record<string, QueryValue> | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === null || value === undefined || value === false) continue;
    if (Array.isArray(value)) {
      for (const item of value) params.append(name, String(item));
    } else if (value instanceof Date) {
      params.append(name, value.toISOString());
    } else {
      params.append(name, value === true ? "true" : String(value));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = cause.cause instanceof Error ? `: ${cause.cause.message}` : "";
    return cause.message + inner;
  }
  return String(cause);
}
