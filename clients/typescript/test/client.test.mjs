// The TypeScript client against a real `memnets serve http` process (tests/server/test_ts_client.py starts it,
// with a tiny encoder, and passes its URL and tokens): node --test test/
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  InvalidArgumentError,
  InvalidMemoryError,
  InvalidTypeError,
  MemnetsClient,
  MemnetsError,
  NotFoundError,
  PermissionDeniedError,
  ServerUnavailableError,
  errorFromResponse,
} from "../dist/index.js";

const URL_ = process.env.MEMNETS_URL;
const ADMIN = process.env.MEMNETS_TOKEN;
const ANN = process.env.MEMNETS_ANN_TOKEN; // a token scoped to user "ann"
// a user's changed fact, from tests/successor_helpers.py: {facts: [[text, ISO time]], question, stale, successor, ks, count}
const CHANGED = process.env.MEMNETS_CHANGED_FACT;
if (!URL_ || !ADMIN || !ANN || !CHANGED)
  throw new Error(
    "set MEMNETS_URL, MEMNETS_TOKEN, MEMNETS_ANN_TOKEN and MEMNETS_CHANGED_FACT (tests/server/test_ts_client.py does)",
  );

const memory = new MemnetsClient(URL_, { token: ADMIN, timeoutMs: 30_000 });
const run = Math.random().toString(36).slice(2, 8);
const user = `ts-${run}`;

after(async () => {
  await memory.deleteAll({ user });
  await memory.deleteAll({ user: "ann" });
});

describe("memories", () => {
  test("add, get, update, history, delete round trip", async () => {
    const added = await memory.add("ann adopted a beagle named rex", {
      user,
      metadata: { topic: "pets" },
      t: new Date("2024-05-01T10:00:00Z"),
    });
    assert.equal(added.content, "ann adopted a beagle named rex");
    assert.equal(added.owner, user);
    assert.equal(added.outcome, "added");
    assert.deepEqual(added.metadata, { topic: "pets" });
    assert.match(added.t, /^2024-05-01T10:00:00/);
    assert.deepEqual(await memory.get(added.id, { user }), { ...added, outcome: null });

    const updated = await memory.update(added.id, { user, text: "ann adopted a beagle named max" });
    assert.equal(updated.id, added.id);
    assert.equal(updated.content, "ann adopted a beagle named max");
    const versions = await memory.history(added.id, { user });
    assert.deepEqual(
      versions.map((m) => m.content),
      ["ann adopted a beagle named rex", "ann adopted a beagle named max"],
    );

    assert.equal(await memory.delete(added.id, { user }), true);
    assert.equal(await memory.delete(added.id, { user }), false);
    assert.equal(await memory.get(added.id, { user }), null);
  });

  test("an id with a slash and an explicit id travel as one path segment", async () => {
    const added = await memory.add("the flat is on rue de la paix", { user, id: "notes/flat 1" });
    assert.equal(added.id, "notes/flat 1");
    assert.equal((await memory.get("notes/flat 1", { user }))?.content, "the flat is on rue de la paix");
    assert.equal(await memory.delete("notes/flat 1", { user }), true);
  });

  test("addMany writes a batch in order; listMemories pages through every page with limit null", async () => {
    const texts = Array.from({ length: 7 }, (_, n) => `fact number ${n} about the garden ${run}`);
    const added = await memory.addMany(texts, { user, kind: "observation", session: "s1" });
    assert.deepEqual(
      added.map((m) => m.content),
      texts,
    );
    assert.ok(added.every((m) => m.session === "s1"));
    const page = await memory.listMemories({ user, limit: 3 });
    assert.equal(page.length, 3);
    const all = await memory.listMemories({ user, limit: null, filters: { session: "s1" } });
    assert.deepEqual(new Set(all.map((m) => m.id)), new Set(added.map((m) => m.id)));
    assert.ok((await memory.users()).includes(user));
    assert.equal(await memory.deleteAll({ user, session: "s1" }), 7);
    assert.deepEqual(await memory.listMemories({ user }), []);
  });
});

describe("reads at a time", () => {
  test("search and listMemories take as_of and known_at; update takes valid_from", async () => {
    const home = `home-${run}`;
    await memory.add("ann lives in paris", { user, id: home, t: new Date("2024-01-01T00:00:00Z") });
    await memory.update(home, { user, text: "ann lives in berlin", t: new Date("2024-06-01T00:00:00Z") });
    const march = new Date("2024-03-01T00:00:00Z");
    const listed = await memory.listMemories({ user, as_of: march, filters: { since: "2023-12-01T00:00:00Z" } });
    assert.deepEqual(
      listed.filter((m) => m.content.includes("lives in")).map((m) => m.content),
      ["ann lives in paris"],
    );
    const known = await memory.listMemories({ user, known_at: "2024-02-01T00:00:00Z" });
    assert.deepEqual(
      known.filter((m) => m.content.includes("lives in")).map((m) => m.content),
      ["ann lives in paris"],
    );
    const hits = await memory.search("where does ann live", { user, k: 10, as_of: march });
    assert.deepEqual(
      hits.filter((h) => h.memory.content.includes("lives in")).map((h) => h.memory.content),
      ["ann lives in paris"],
    );
    const moved = await memory.update(home, {
      user,
      text: "ann lives in rome",
      t: new Date("2024-09-01T00:00:00Z"),
      valid_from: new Date("2024-08-01T00:00:00Z"),
    });
    assert.match(moved.valid_from, /^2024-08-01T00:00:00/);
    assert.equal(await memory.delete(home, { user }), true);
  });
});

describe("a changed fact", () => {
  test("search never answers a stale fact above its successor, at any k", async () => {
    // the server's judge (shipped with memnets) ends the stale fact by its successor; the question is the stale fact's own text
    const { facts, question, stale, successor, ks, count } = JSON.parse(CHANGED);
    const mover = `${user}-mover`;
    for (const [text, when] of facts) await memory.add(text, { user: mover, t: new Date(when) });
    const answers = {};
    for (const k of ks) answers[k] = await memory.search(question, { user: mover, k });
    const longest = answers[Math.max(...ks)];
    assert.equal(longest.length, count);
    for (const k of ks) {
      const texts = answers[k].map((hit) => hit.memory.content);
      const scores = answers[k].map((hit) => hit.score);
      assert.equal(texts.length, k);
      assert.equal(texts[0], successor, `k=${k}: ${texts}`);
      assert.ok(!texts.includes(stale) || texts.indexOf(stale) === 1, `k=${k}: ${texts}`);
      assert.ok(
        scores.every((score, n) => n === 0 || scores[n - 1] >= score),
        `k=${k}: ${scores}`,
      );
      assert.deepEqual(
        texts,
        longest.slice(0, k).map((hit) => hit.memory.content),
      );
    }
    assert.equal(longest[1].memory.invalidated_by, longest[0].memory.id);
    await memory.deleteAll({ user: mover });
  });
});

describe("search", () => {
  before(async () => {
    await memory.add("ann walks her beagle in the park every morning", {
      user,
      metadata: { topic: "pets", year: 2024 },
    });
    await memory.add("ann's sister lives in lyon", { user, metadata: { topic: "family", year: 2021 } });
    await memory.add("ann plans a trip to kyoto", { user, kind: "plan", metadata: { topic: "travel", year: 2025 } });
  });

  test("hits come best first with their score parts; the whole answer names the ranker", async () => {
    const hits = await memory.search("the beagle in the park", { user, k: 3 });
    assert.equal(hits.length, 3);
    for (const hit of hits) {
      assert.equal(typeof hit.score, "number");
      assert.deepEqual(Object.keys(hit.parts).sort(), ["importance", "learned", "recency", "relevance"]);
    }
    assert.ok(hits[0].score >= hits[1].score && hits[1].score >= hits[2].score);
    const answer = await memory.searchExplained("the beagle in the park", { user, k: 1 });
    assert.equal(answer.ranker, "cosine");
    assert.equal(answer.weights, null);
    assert.equal(answer.results.length, 1);
  });

  test("filters narrow before ranking: metadata operators, kind, $or", async () => {
    const recent = await memory.search("ann", { user, k: 5, filters: { metadata: { year: { $gte: 2024 } } } });
    assert.deepEqual(new Set(recent.map((h) => h.memory.metadata.topic)), new Set(["pets", "travel"]));
    const plans = await memory.search("ann", { user, k: 5, filters: { kind: "plan" } });
    assert.deepEqual(
      plans.map((h) => h.memory.content),
      ["ann plans a trip to kyoto"],
    );
    const either = await memory.search("ann", {
      user,
      k: 5,
      filters: { $or: [{ kind: "plan" }, { metadata: { topic: "family" } }] },
    });
    assert.equal(either.length, 2);
    const none = await memory.search("ann", { user, k: 5, filters: { since: new Date(Date.now() + 86_400_000) } });
    assert.deepEqual(none, []);
  });

  test("searchMany answers per user, the query encoded once", async () => {
    const other = `${user}-b`;
    await memory.add("bob keeps bees", { user: other });
    const found = await memory.searchMany("bees", { users: [user, other], k: 1 });
    assert.deepEqual(Object.keys(found), [user, other]);
    assert.equal(found[other][0].memory.content, "bob keeps bees");
    await memory.deleteAll({ user: other });
  });
});

describe("the manager routes", () => {
  test("observe, context and the manager's tiers", async () => {
    const seen = await memory.observe(user, "ann starts a new job at the bakery on monday", { kind: "observation" });
    assert.equal(seen.content, "ann starts a new job at the bakery on monday");
    const view = await memory.context(user, "where does ann work?", { k: 2 });
    assert.equal(typeof view.recalled, "boolean");
    assert.ok(Array.isArray(view.memories) && Array.isArray(view.messages));
    const tiers = await memory.manager(user);
    assert.ok(tiers.context.some((m) => m.content === "ann starts a new job at the bakery on monday"));
    assert.ok(Array.isArray(tiers.gate));
  });
});

describe("messages", () => {
  test("addMessages stores a transcript: one outcome per message, a message id keys it", async () => {
    const chat = [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", name: "Ann", content: "I moved to Lyon last spring", id: `m1-${run}` },
      { role: "assistant", content: [{ type: "text", text: "Noted: you live in Lyon." }], id: `m2-${run}` },
    ];
    const outcomes = await memory.addMessages(chat, { user, session: "chat-1" });
    assert.deepEqual(
      outcomes.map((o) => [o.index, o.role, o.outcome, o.reason]),
      [
        [0, "system", "skipped", "role"],
        [1, "user", "added", null],
        [2, "assistant", "skipped", "role"], // the default stores what the user said
      ],
    );
    assert.equal(outcomes[0].memory, null);
    assert.equal(outcomes[1].memory.content, "Ann: I moved to Lyon last spring");
    assert.deepEqual(outcomes[1].memory.metadata, { role: "user", speaker: "Ann" });
    assert.equal(outcomes[1].memory.session, "chat-1");
    const again = await memory.addMessages(chat, { user, session: "chat-1" }); // the whole history again
    assert.deepEqual(
      again.slice(1).map((o) => o.outcome),
      ["unchanged", "skipped"],
    );
    await assert.rejects(
      memory.addMessages([{ content: "no role" }], { user }),
      (error) => error instanceof MemnetsError && error.status === 422 && /messages\[0\]\.role/.test(error.message),
    );
  });
});

describe("errors", () => {
  test("each server code is its own class, with the status, the code and the field", async () => {
    // k: 0 the client refuses itself (status null); past the server's bound only the server knows
    await assert.rejects(memory.search("x", { user, k: 20_000 }), (error) => {
      assert.ok(error instanceof InvalidArgumentError && error instanceof MemnetsError);
      assert.equal(error.status, 422);
      assert.equal(error.code, "invalid_argument");
      assert.equal(error.field, "k");
      assert.equal(error.type, "ValueError");
      return true;
    });
    await assert.rejects(memory.add("   ", { user }), (error) => error instanceof MemnetsError && error.status === 422);
    await assert.rejects(memory.search("x", { user, filters: { colour: "red" } }), InvalidArgumentError);
    await assert.rejects(memory.update("no-such-id", { user, text: "x" }), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.status, 404);
      assert.equal(error.code, "not_found");
      return true;
    });
    await assert.rejects(memory.add("\ud800 lone surrogate", { user }), InvalidMemoryError);
  });

  test("a token reaches its own user only; a wrong token is refused", async () => {
    const ann = new MemnetsClient(URL_, { token: ANN });
    assert.equal((await ann.add("ann's own memory", { user: "ann" })).owner, "ann");
    assert.deepEqual(await ann.users(), ["ann"]);
    await assert.rejects(
      ann.search("x", { user }),
      (error) => error instanceof PermissionDeniedError && error.status === 403,
    );
    const stranger = new MemnetsClient(URL_, { token: "not-a-token" });
    await assert.rejects(
      stranger.users(),
      (error) => error instanceof PermissionDeniedError && error.code === "unauthorized",
    );
    await assert.rejects(new MemnetsClient(URL_).users(), PermissionDeniedError);
  });

  test("wrong arguments are refused before any request", async () => {
    await assert.rejects(memory.delete(".", { user }), InvalidArgumentError); // would be DELETE /v1/memories
    await assert.rejects(memory.get("..", { user }), InvalidArgumentError);
    await assert.rejects(memory.add(42, { user }), InvalidTypeError);
    await assert.rejects(memory.addMany("hello world", { user }), InvalidTypeError);
    for (const number of [NaN, Infinity, -Infinity]) {
      // JSON.stringify would send null, stored without a word; the server refuses such a number, and so does the client
      await assert.rejects(
        memory.add("a score", { user, metadata: { score: number } }),
        (error) =>
          error instanceof InvalidArgumentError && error.field === "metadata" && /must be finite/.test(error.message),
      );
    }
    assert.throws(() => new MemnetsClient("localhost:8000"), InvalidArgumentError);
    assert.throws(() => new MemnetsClient(URL_, { token: " " }), InvalidArgumentError);
  });

  test("options are checked in the client's words before any request", async () => {
    let requests = 0;
    const counted = new MemnetsClient(URL_, { token: ADMIN, fetch: (...args) => (requests++, fetch(...args)) });
    const refusals = [
      [
        () => counted.add("x", { user, bogus: 1 }),
        InvalidArgumentError,
        /^add: unknown option "bogus" \(add takes user, id/,
      ],
      [() => counted.add("x", { user: null }), InvalidTypeError, /^add: user must be a non-empty string, got null$/],
      [() => counted.add("x", {}), InvalidArgumentError, /^add: the user option is required$/],
      [
        () => counted.add("x", { user, importance: "high" }),
        InvalidTypeError,
        /importance must be a number in \[0, 1\], got "high"/,
      ],
      [
        () => counted.search("x", { user, k: 0 }),
        InvalidArgumentError,
        /^search: k must be an integer of at least 1, got 0$/,
      ],
      [() => counted.search("x", { user, limit: 3 }), InvalidArgumentError, /^search: unknown option "limit"/],
      [
        () => counted.listMemories({ user, offset: -1 }),
        InvalidArgumentError,
        /offset must be an integer of at least 0/,
      ],
      [() => counted.get("id", { user: null }), InvalidTypeError, /^get: user must be a non-empty string, got null$/],
      [() => counted.addMany(["a", 3], { user }), InvalidTypeError, /^addMany: texts\[1\] must be a string, got 3$/],
      [() => counted.observe(user, "x", { bogus: 1 }), InvalidArgumentError, /^observe: unknown option "bogus"/],
    ];
    for (const [call, Class, words] of refusals) {
      await assert.rejects(call(), (error) => {
        assert.ok(error instanceof Class, `${error.name}: ${error.message}`);
        assert.match(error.message, words);
        assert.doesNotMatch(error.message, /NoneType|keyword argument|AgentMemory/);
        assert.equal(error.status, null);
        return true;
      });
    }
    assert.equal(requests, 0);
  });

  test("the server's answers in the Python API's words are put in the client's", async () => {
    // what a request that skips the client's checks gets from the real server, read by the client's errorFromResponse
    const answer = await fetch(`${URL_}/v1/memories`, {
      method: "POST",
      headers: { Authorization: `Bearer ${ADMIN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ user, text: "x", bogus: 1, importance: "high" }),
    });
    const body = await answer.text();
    assert.match(body, /unknown field 'bogus'|got str/); // the server's own words
    const error = errorFromResponse(answer.status, body, null);
    assert.ok(error instanceof MemnetsError && error.status === 422);
    assert.doesNotMatch(error.message, /keyword argument|NoneType|\bstr\b|Memory '/);
    const nulled = await fetch(`${URL_}/v1/search`, {
      method: "POST",
      headers: { Authorization: `Bearer ${ADMIN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ user, query: "x", k: null }),
    });
    assert.equal(
      errorFromResponse(nulled.status, await nulled.text(), null).message,
      "422 invalid_type: k must be an integer, got null",
    );
  });

  test("no server, or no answer within the timeout: ServerUnavailableError", async () => {
    const silent = createServer(() => {}); // accepts connections and never answers
    await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address();
    try {
      const waiting = new MemnetsClient(`http://127.0.0.1:${port}`, { timeoutMs: 300 });
      await assert.rejects(
        waiting.users(),
        (error) => error instanceof ServerUnavailableError && /no answer within 300 ms/.test(error.message),
      );
    } finally {
      silent.close();
    }
    const nobody = new MemnetsClient(`http://127.0.0.1:${port}`, { timeoutMs: 5_000 });
    await assert.rejects(nobody.users(), ServerUnavailableError);
    assert.equal(await memory.ready(), true);
  });
});
