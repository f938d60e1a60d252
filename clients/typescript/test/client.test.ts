/**
 * The client against a live memoryd (MEMORYD_URL, MEMORYD_KEY, MEMORYD_KEY_B: two tenants'
 * keys; tests/clients/test_typescript_client.py starts the stack and sets them), and its
 * retry policy against a local HTTP server that answers 503 / 429 before it answers 200.
 * Without MEMORYD_URL the live tests are skipped and say so.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  DEFAULT_RETRY, JobTimeout, MemorydClient, MemorydError, retryAfterMs, type JobView,
} from "../src/index.js";

const BASE_URL = process.env.MEMORYD_URL;
const KEY = process.env.MEMORYD_KEY;
const KEY_B = process.env.MEMORYD_KEY_B;
const live = BASE_URL && KEY && KEY_B ? false : "MEMORYD_URL, MEMORYD_KEY and MEMORYD_KEY_B are not set";

describe("against a live stack", { skip: live }, () => {
  const memory = new MemorydClient(BASE_URL ?? "", KEY);
  const other = new MemorydClient(BASE_URL ?? "", KEY_B);
  const user = `ts-${randomUUID().slice(0, 12)}`;
  const fact = "I keep three beehives on the roof of my building in Lyon";
  let memoryId = "";

  before(async () => {
    const job = await memory.addInteraction(user, [
      { role: "user", content: fact },
      { role: "assistant", content: "Bees on a roof, lovely." },
    ], { extract: "raw", thread_id: "t-1" });
    assert.equal(job.status, "queued");
    const done: JobView = await memory.wait(job.job_id);
    assert.equal(done.status, "succeeded", JSON.stringify(done));
  });

  test("add an interaction, wait for its job, search finds it", async () => {
    const found = await memory.search(user, "where are my beehives?", { top_k: 3 });
    assert.ok(found.results.length >= 1, JSON.stringify(found));
    const best = found.results[0]!;
    assert.equal(best.memory.content, fact);
    assert.ok(best.score > 0 && best.score <= 1, String(best.score));
    memoryId = best.memory.id;
    const one = await memory.get(user, memoryId);
    assert.equal(one.content, fact);
    const page = await memory.list(user, { limit: 10 });
    assert.deepEqual(page.items.map((m) => m.id), [memoryId]);
  });

  test("context packs the memory into a prompt block", async () => {
    const ctx = await memory.context(user, "where are my beehives?", { token_budget: 200, min_score: 0.1 });
    assert.ok(ctx.block.includes("beehives"), ctx.block);
    assert.ok(ctx.tokens > 0 && ctx.tokens <= 200, String(ctx.tokens));
    assert.equal(ctx.items.length, 1);
  });

  test("a fresh search reads a write that was just enqueued", async () => {
    const cyclist = `${user}-fresh`; // a user of its own: the others' counts stay as they are
    const job = await memory.addInteraction(cyclist, [
      { role: "user", content: "My tandem bicycle is painted bright orange" },
    ], { extract: "raw" });
    const found = await memory.search(cyclist, "what colour is my tandem bicycle?", {
      top_k: 3, after_jobs: [job.job_id], consistency: "fresh",
    });
    assert.equal(found.freshness?.applied, true, JSON.stringify(found.freshness));
    assert.ok(found.results.some((r) => r.memory.content.includes("tandem")), JSON.stringify(found));
  });

  test("save, update and history, then forget", async () => {
    const saved = await memory.save(user, "My favourite tea is oolong", { wait: 20, tags: ["tea"] });
    assert.ok("outcome" in saved, JSON.stringify(saved));
    assert.equal(saved.outcome, "added");
    const id = saved.memory!.id;
    await memory.update(user, id, { importance: 9 }, { wait: 20 });
    assert.equal((await memory.get(user, id)).importance, 9);
    const history = await memory.history(user, id);
    assert.ok(history.events.length >= 2, JSON.stringify(history));
    await memory.forget(user, id, {}, { wait: 20 });
    await assert.rejects(memory.get(user, id), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.status, 404);
      return true;
    });
  });

  test("a 422 becomes a MemorydError with the code and the field", async () => {
    await assert.rejects(memory.search(user, "bees", { top_k: 0 }), (err: unknown) => {
      assert.ok(err instanceof MemorydError, String(err));
      assert.equal(err.status, 422);
      assert.equal(err.code, "invalid_input");
      assert.equal(err.field, "top_k");
      assert.ok(err.message.length > 0);
      return true;
    });
    await assert.rejects(memory.addInteraction(user, []), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.status, 422);
      assert.equal(err.field, "messages");
      return true;
    });
    // The refused requests changed nothing.
    assert.equal((await memory.list(user)).items.length, 1);
  });

  test("export streams the user's records", async () => {
    const records: Record<string, unknown>[] = [];
    for await (const record of memory.export(user)) records.push(record);
    assert.equal(records.length, 1, JSON.stringify(records));
    assert.equal(records[0]!.content, fact);
  });

  test("another tenant's key sees nothing of this user", async () => {
    const theirs = await other.search(user, "where are my beehives?");
    assert.deepEqual(theirs.results, []);
    assert.deepEqual((await other.list(user)).items, []);
    await assert.rejects(other.get(user, memoryId), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.status, 404);
      return true;
    });
  });

  test("a wrong key is a 401 MemorydError", async () => {
    const stranger = new MemorydClient(BASE_URL ?? "", "not-a-key");
    await assert.rejects(stranger.search(user, "bees"), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.status, 401);
      assert.ok(err.code.length > 0);
      return true;
    });
  });

  test("ready reports the stack", async () => {
    const report = await memory.ready();
    assert.equal(typeof report, "object");
    assert.ok(Object.keys(report).length > 0);
  });
});

interface Reply { status: number; headers?: Record<string, string>; body: unknown }

/** A local server that answers each request with the next scripted reply. */
class Scripted {
  readonly seen: { method: string; url: string; body: string; at: number }[] = [];
  private readonly server = createServer((req, res) => this.handle(req, res));
  private replies: Reply[] = [];
  url = "";

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  script(...replies: Reply[]): void {
    this.replies = replies;
    this.seen.length = 0;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      this.seen.push({ method: req.method ?? "", url: req.url ?? "", body: Buffer.concat(chunks).toString(), at: Date.now() });
      const reply = this.replies.shift() ?? { status: 500, body: { error: { code: "unscripted", message: "no reply left" } } };
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      res.end(JSON.stringify(reply.body));
    });
  }
}

const busy = (status: number, retryAfter?: string): Reply => ({
  status,
  headers: retryAfter === undefined ? {} : { "retry-after": retryAfter },
  body: { error: { code: status === 429 ? "rate_limited" : "unavailable", message: "try later", field: null } },
});
const hits: Reply = { status: 200, body: { results: [], took_ms: 1 } };

describe("retry policy", () => {
  let server: Scripted;
  let client: MemorydClient;

  before(async () => {
    server = await new Scripted().start();
    client = new MemorydClient(server.url, "k", { retry: { baseMs: 1, maxMs: 5 } });
  });
  after(() => server.stop());

  test("a 503 with Retry-After is retried after that many seconds, then succeeds", async () => {
    server.script(busy(503, "1"), hits);
    const found = await client.search("u", "q");
    assert.deepEqual(found.results, []);
    assert.equal(server.seen.length, 2);
    const waited = server.seen[1]!.at - server.seen[0]!.at;
    assert.ok(waited >= 950, `retried after ${waited} ms, Retry-After said 1 s`);
    assert.equal(server.seen[1]!.body, server.seen[0]!.body, "the same request is sent again");
  });

  test("a 429 is retried too, writes included, with an HTTP-date Retry-After", async () => {
    server.script(busy(429, new Date(Date.now() - 5_000).toUTCString()), busy(429, "0"),
      { status: 202, body: { job_id: "j1", status: "queued" } });
    const job = await client.addInteraction("u", [{ role: "user", content: "hi" }]);
    assert.equal(job.job_id, "j1");
    assert.deepEqual(server.seen.map((s) => s.method), ["POST", "POST", "POST"]);
  });

  test("after the last attempt the 503 is thrown as a MemorydError", async () => {
    server.script(busy(503, "0"), busy(503, "0"), busy(503, "0"), busy(503, "0"), hits);
    await assert.rejects(client.search("u", "q"), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.status, 503);
      assert.equal(err.code, "unavailable");
      return true;
    });
    assert.equal(server.seen.length, DEFAULT_RETRY.attempts);
  });

  test("without Retry-After the backoff is used; other errors are not retried", async () => {
    server.script(busy(503), hits);
    await client.search("u", "q");
    assert.equal(server.seen.length, 2);
    server.script({ status: 500, body: { error: { code: "internal", message: "boom" } } }, hits);
    await assert.rejects(client.search("u", "q"), (err: unknown) => err instanceof MemorydError && err.status === 500);
    assert.equal(server.seen.length, 1);
  });

  test("ready() takes a 503 as its answer and never retries it", async () => {
    server.script({ status: 503, body: { redis: "down" } }, { status: 200, body: { redis: "ok" } });
    assert.deepEqual(await client.ready(), { redis: "down" });
    assert.equal(server.seen.length, 1);
  });

  test("an answer without memoryd's error body still becomes a MemorydError", async () => {
    server.script({ status: 502, body: "bad gateway" });
    await assert.rejects(client.search("u", "q"), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.code, "http_502");
      assert.equal(err.field, null);
      return true;
    });
  });

  test("wait() gives up with JobTimeout and the last state", async () => {
    const running = { status: 200, body: { job_id: "j2", status: "running", kind: "x", attempts: 1 } };
    server.script(running, running, running, running, running, running, running, running);
    await assert.rejects(client.wait("j2", { timeoutMs: 60, pollMs: 10 }), (err: unknown) => {
      assert.ok(err instanceof JobTimeout);
      assert.equal(err.code, "job_timeout");
      assert.equal(err.job.status, "running");
      return true;
    });
  });

  test("nothing listening is an 'unreachable' MemorydError", async () => {
    const gone = new MemorydClient("http://127.0.0.1:9", "k");
    await assert.rejects(gone.search("u", "q"), (err: unknown) => {
      assert.ok(err instanceof MemorydError);
      assert.equal(err.code, "unreachable");
      assert.equal(err.status, null);
      return true;
    });
  });
});

test("Retry-After: delta-seconds, HTTP dates, nonsense", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(retryAfterMs("2", now), 2_000);
  assert.equal(retryAfterMs(" 0.5 ", now), 500);
  assert.equal(retryAfterMs("Thu, 01 Jan 2026 00:00:03 GMT", now), 3_000);
  assert.equal(retryAfterMs("Wed, 31 Dec 2025 23:00:00 GMT", now), 0);
  assert.equal(retryAfterMs("soon", now), null);
  assert.equal(retryAfterMs(null, now), null);
});
