import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { REFUND_SCRIPT, startMockLlm, type LoggedRequest, type MockLlm, type MockScript } from "../../src/testing/mock-llm/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { sqliteWriteLockIsFree, Worker } from "./crash-harness.js";
import { storeOf } from "../../src/internal.js";
import { scratchDir } from "../scratch.js";

/**
 * SIGKILL crash tests for agents: test/fixtures/agent-worker.mjs (over the built package) runs
 * the agents and is killed at chosen points; the mock LLM runs here, in the test process, so its
 * request log counts every provider contact across worker restarts.
 */

const WORKER = fileURLToPath(new URL("../fixtures/agent-worker.mjs", import.meta.url));

const STORY = "Order 7505 left the warehouse at dawn, crossed three rivers and two mountain passes, and reached its owner before the kettle boiled.";

/** The support agent answers by REFUND_SCRIPT; the lead delegates to a researcher; the storyteller streams. */
const SCRIPT: MockScript = {
  rules: [
    { match: { model: "story-model" }, reply: { content: STORY } },
    {
      match: { model: "researcher-model", lastRole: "tool" },
      reply: { content: "Found: {{lastToolResult.fact}}." },
      // The researcher's answer to its first search is held until the worker is killed.
      fault: { delayMs: 30_000, times: 1 },
    },
    { match: { model: "researcher-model", lastRole: "user" }, reply: { toolCalls: [{ name: "search", arguments: { query: "{{promptNumber}}" } }] } },
    { match: { model: "lead-model", lastRole: "tool" }, reply: { content: "Report: {{lastToolResult}}" } },
    {
      match: { model: "lead-model", lastRole: "user" },
      reply: { toolCalls: [{ name: "research", arguments: { prompt: "What happened to order {{promptNumber}}?" } }] },
    },
    ...REFUND_SCRIPT.rules,
  ],
};

interface Spawn {
  start?: { agent: "support" | "lead" | "storyteller"; id: string; prompt: string }[];
  await?: string[];
  approve?: boolean;
  hang?: string[];
  streamDelayMs?: number;
  leaseMs?: number;
  /** Stay up after reporting the awaited runs. */
  stay?: boolean;
  /** The model provider's URL; default the test's mock LLM. */
  llm?: string;
}

/**
 * A request to the model, named by its messages: the model, how many messages, and the last one
 * (role and text). Within one run each turn sends a different conversation, so this names the turn.
 */
function identity(r: LoggedRequest): string {
  return `${r.model} #${r.messageCount} ${r.lastMessage?.role}: ${r.lastMessage?.preview}`;
}

/** How often the mock was asked each distinct request about `order` (every run here has its own order number), by turn. */
function asked(requests: LoggedRequest[], order: number): [string, number][] {
  const counts = new Map<string, number>();
  for (const r of requests) if (r.lastMessage?.preview.includes(String(order))) counts.set(identity(r), (counts.get(identity(r)) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => byTurn(a, b));
}

function byTurn(a: string, b: string): number {
  const count = (id: string) => Number(/ #(\d+) /.exec(id)![1]);
  return a.split(" ")[0]!.localeCompare(b.split(" ")[0]!) || count(a) - count(b);
}

async function modelCalls(cairn: Cairn, runId: string): Promise<number> {
  const rows = await storeOf(cairn).select<{ n: number }>("SELECT count(*) AS n FROM cairn_model_calls WHERE run_id = $1", [runId]);
  return Number(rows[0]!.n);
}

/** The payment ledger's charges (idempotency keys), and the researcher's searches. */
function ledgerLines(path: string, kind: "charge" | "search"): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.startsWith(`${kind} `))
    .map((line) => line.split(" ")[1]!);
}

async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe.each(BACKENDS)("SIGKILL during agents on $name", (backend) => {
  const env = cairnFactory(backend);
  const alive: Worker[] = [];
  let llm: MockLlm | undefined;
  let other: MockLlm | undefined;
  let ledger = "";
  afterEach(async () => {
    await Promise.all(alive.splice(0).map((w) => w.kill()));
    await Promise.all([llm?.close(), other?.close()]);
    llm = other = undefined;
  });

  async function setUp(latencyMs = 0): Promise<{ db: string; observer: Cairn; llm: MockLlm }> {
    llm = await startMockLlm({ script: SCRIPT, latencyMs });
    ledger = join(scratchDir("cairn-agent-crash-"), "ledger.txt");
    const db = await env.database();
    // The test's own Cairn on the database: never launched; it reads, and approves.
    return { db, observer: env.cairn(db), llm };
  }

  function worker(db: string, options: Spawn): Worker {
    const vars: NodeJS.ProcessEnv = { ...process.env, DB: db, LLM: options.llm ?? llm!.url, LEDGER: ledger };
    if (options.start !== undefined) vars.START = JSON.stringify(options.start);
    if (options.await !== undefined) vars.AWAIT = JSON.stringify(options.await);
    if (options.approve === true) vars.APPROVE = "1";
    if (options.hang !== undefined) vars.HANG = options.hang.join(",");
    if (options.streamDelayMs !== undefined) vars.STREAM_DELAY_MS = String(options.streamDelayMs);
    if (options.leaseMs !== undefined) vars.LEASE_MS = String(options.leaseMs);
    if (options.stay === true) vars.STAY = "1";
    const w = new Worker(spawn(process.execPath, [WORKER], { env: vars, stdio: ["ignore", "pipe", "pipe"] }));
    alive.push(w);
    return w;
  }

  /**
   * SIGSTOPs the worker at a moment it holds no database lock: a process frozen inside a write
   * transaction (its claim poll, or the run's receive as it begins to wait) would keep the
   * approval waiting — and SQLite's busy wait would block this whole process meanwhile.
   */
  async function freezeOutsideWrites(w: Worker, observer: Cairn, db: string): Promise<void> {
    for (let attempt = 0; attempt < 100; attempt++) {
      w.pause();
      await eventually(() => stopped(w.pid), 2000);
      if (await holdsNoLock(observer, db)) return;
      w.resume();
      await new Promise((resolve) => setTimeout(resolve, 2 + attempt));
    }
    throw new Error(`worker ${w.pid} was inside a database write at every one of 100 freezes`);
  }

  async function holdsNoLock(observer: Cairn, db: string): Promise<boolean> {
    if (backend.name === "postgres") {
      const busy = await storeOf(observer).select<{ n: number }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'",
      );
      return Number(busy[0]!.n) === 0;
    }
    return sqliteWriteLockIsFree(db);
  }

  const refunded = (order: number) => `Refunded order ${order}: 4200 cents are on their way back to the original payment method.`;

  it("killed right after a model response was recorded: the run completes and no recorded call is made again", async () => {
    // Each answer takes 200 ms, so the next call is at most in flight (never recorded) when the kill lands.
    const { db, observer } = await setUp(200);
    const order = 7101;
    let w = worker(db, { start: [{ agent: "support", id: "recorded", prompt: `Refund order ${order}` }] });
    await w.line(/^started recorded$/);
    /** Per killed worker: the requests it made, how many the log held then, and how many responses were recorded. */
    const killed: { requests: LoggedRequest[]; logged: number; recorded: number }[] = [];
    let seen = 0;
    for (const rows of [1, 2]) {
      await eventually(async () => (await modelCalls(observer, "recorded")) >= rows);
      // The first kill lands as soon as the response is recorded; the second once the next call
      // is also on its way (the mock holds it for 200 ms): that one must be asked again.
      if (rows === 2) await eventually(() => asked(llm!.requests(), order).length === 3);
      await w.kill();
      const requests = llm!.requests();
      killed.push({ requests: requests.slice(seen), logged: requests.length, recorded: await modelCalls(observer, "recorded") });
      seen = requests.length;
      w = worker(db, { await: ["recorded"] });
    }
    expect(await w.result("recorded")).toMatchObject({ status: "succeeded", value: { text: refunded(order), steps: 3 } });
    await w.finished();

    // The three turns, in order; a turn's response is recorded once the worker that asked for it
    // committed it. A turn recorded before a kill is never asked again; a turn in flight at a kill
    // is asked again by the next worker, once.
    const all = llm!.requests();
    const turns = asked(all, order).map(([id]) => id);
    expect(turns).toHaveLength(3);
    const expected = new Map(turns.map((id) => [id, 1]));
    for (const [k, { requests, logged, recorded }] of killed.entries()) {
      const done = new Set(turns.slice(0, recorded));
      const later = all.slice(logged).map(identity);
      for (const id of done) expect(later, `turn "${id}" was recorded before kill ${k + 1}, then asked again`).not.toContain(id);
      for (const id of new Set(requests.map(identity))) if (!done.has(id)) expected.set(id, expected.get(id)! + 1);
    }
    expect(killed.map((k) => k.recorded)).toEqual([1, 2]);
    expect(asked(all, order)).toEqual([...expected]);
    expect(expected.get(turns[2]!)).toBe(2);
    expect(await modelCalls(observer, "recorded")).toBe(3);
    // Provenance and budget survive the kills: each tool call names the model call (turn) that
    // asked for it, and each recorded call was charged once (the ones cut off in flight not at all).
    expect(await provenance(observer, "recorded")).toEqual([
      ["lookUpOrder", 0],
      ["refund", 1],
    ]);
    expect(await modelCallsSpent(observer, "recorded")).toBe(3);
    expect(ledgerLines(ledger, "charge")).toHaveLength(1);
    expect((await storeOf(observer).getRun("recorded"))!.recoveries).toBe(2);
  });

  it("killed inside the refund tool after the payment service charged: it runs again with the same key, and charges once", async () => {
    const { db, observer } = await setUp();
    const order = 7202;
    const first = worker(db, { start: [{ agent: "support", id: "charged", prompt: `Refund order ${order}` }], hang: ["charged@charged"] });
    const key = (await first.line(/^hang charged charged (\S+)$/))[1]!;
    expect(first.lines).toContain(`charged ${key}`);
    await first.kill();
    expect(ledgerLines(ledger, "charge")).toEqual([key]);
    const tools = () => storeOf(observer).select<{ tool_name: string }>("SELECT tool_name FROM cairn_tool_calls WHERE run_id = 'charged' ORDER BY seq");
    expect((await tools()).map((r) => r.tool_name)).toEqual(["lookUpOrder"]);

    const second = worker(db, { await: ["charged"] });
    expect(await second.result("charged")).toMatchObject({ status: "succeeded", value: { text: refunded(order), steps: 3 } });
    await second.finished();
    expect(second.lines).toContain(`refund charged ${key}`);
    expect(second.lines).toContain(`charge-dup ${key}`);
    expect(second.lines.filter((l) => l.startsWith("charged "))).toEqual([]);
    expect(ledgerLines(ledger, "charge")).toEqual([key]);
    expect((await tools()).map((r) => r.tool_name)).toEqual(["lookUpOrder", "refund"]);
    // The tool was in progress, not the model: every model call was made once.
    expect(asked(llm!.requests(), order).map(([, n]) => n)).toEqual([1, 1, 1]);
    expect(await modelCalls(observer, "charged")).toBe(3);
    expect(await provenance(observer, "charged")).toEqual([
      ["lookUpOrder", 0],
      ["refund", 1],
    ]);
    expect(await modelCallsSpent(observer, "charged")).toBe(3);
  });

  it("killed while waiting for an approval: another process approves, and a new worker finishes the run", async () => {
    const { db, observer } = await setUp();
    const order = 7303;
    const first = worker(db, { start: [{ agent: "support", id: "waits", prompt: `Refund order ${order}` }], approve: true });
    await first.line(/^started waits$/);
    const [pending] = await eventually(async () => {
      const list = await observer.approvals.list({ runId: "waits" });
      return list.length > 0 ? list : undefined;
    });
    // Waiting costs no memory: the run is unloaded until a decision arrives.
    await eventually(async () => (await storeOf(observer).getRun("waits"))!.status === "waiting");
    expect(pending).toMatchObject({ runId: "waits", toolName: "refund", input: { id: order, amountCents: 4200 } });
    await first.kill();

    // Nobody runs the agent now: the approval is a row and a message, committed from here.
    await observer.approvals.approve("waits", pending!.toolCallId, { by: "ops" });
    const second = worker(db, { await: ["waits"], approve: true });
    expect(await second.result("waits")).toMatchObject({ status: "succeeded", value: { text: refunded(order), steps: 3 } });
    await second.finished();
    expect(first.lines.some((l) => l.startsWith("refund "))).toBe(false);
    expect(ledgerLines(ledger, "charge")).toHaveLength(1);
    expect(asked(llm!.requests(), order).map(([, n]) => n)).toEqual([1, 1, 1]);
    const decided = await storeOf(observer).select<{ tool_name: string; decided_by: string | null }>(
      "SELECT tool_name, decided_by FROM cairn_tool_calls WHERE run_id = 'waits' ORDER BY seq",
    );
    expect(decided).toEqual([
      { tool_name: "lookUpOrder", decided_by: null },
      { tool_name: "refund", decided_by: "ops" },
    ]);
    await expect(observer.approvals.approve("waits", pending!.toolCallId)).rejects.toThrow(/already decided/);
  });

  it("killed right after the approval was given, before the run resumed: the decision is used exactly once", async () => {
    const { db, observer } = await setUp();
    const order = 7313;
    const first = worker(db, { start: [{ agent: "support", id: "decided", prompt: `Refund order ${order}` }], approve: true });
    await first.line(/^started decided$/);
    const [pending] = await eventually(async () => {
      const list = await observer.approvals.list({ runId: "decided" });
      return list.length > 0 ? list : undefined;
    });
    // Waiting costs no memory: the run is unloaded until a decision arrives.
    await eventually(async () => (await storeOf(observer).getRun("decided"))!.status === "waiting");
    // Frozen, the worker cannot resume the run between the approval and the kill.
    await freezeOutsideWrites(first, observer, db);
    await within(observer.approvals.approve("decided", pending!.toolCallId, { by: "ops" }), 5000, "the approval");
    await first.kill();
    expect(first.lines.some((l) => l.startsWith("refund "))).toBe(false);
    const inbox = () =>
      storeOf(observer).select<{ consumed: number }>(
        "SELECT count(consumed_at) AS consumed FROM cairn_messages WHERE run_id = 'decided' AND topic LIKE 'approval:%'",
      );
    expect((await inbox()).map((r) => Number(r.consumed))).toEqual([0]);

    const second = worker(db, { await: ["decided"], approve: true });
    expect(await second.result("decided")).toMatchObject({ status: "succeeded", value: { text: refunded(order), steps: 3 } });
    await second.finished();
    expect((await inbox()).map((r) => Number(r.consumed))).toEqual([1]);
    expect(ledgerLines(ledger, "charge")).toHaveLength(1);
    expect(second.lines.filter((l) => l.startsWith("refund "))).toHaveLength(1);
    expect(asked(llm!.requests(), order).map(([, n]) => n)).toEqual([1, 1, 1]);
    const approvals = await storeOf(observer).select<{ status: string; decided_by: string }>(
      "SELECT status, decided_by FROM cairn_approvals WHERE run_id = 'decided'",
    );
    expect(approvals).toEqual([{ status: "approved", decided_by: "ops" }]);
  });

  it("killed while a sub-agent's run is mid-flight: both finish, and no recorded model call is made again", async () => {
    const { db, observer } = await setUp();
    const order = 7404;
    const first = worker(db, { start: [{ agent: "lead", id: "lead", prompt: `What happened to order ${order}?` }] });
    await first.line(/^started lead$/);
    // The researcher searched and asked the model again; the mock holds that answer back.
    await eventually(() => llm!.requests().some((r) => r.model === "researcher-model" && r.lastMessage?.role === "tool"));
    const [child] = await storeOf(observer).listRuns({ parentId: "lead" });
    expect(child).toMatchObject({ workflow: "researcher", status: "running" });
    expect([await modelCalls(observer, "lead"), await modelCalls(observer, child!.id)]).toEqual([1, 1]);
    expect((await storeOf(observer).getRun("lead"))!.status).toBe("waiting");
    await first.kill();

    const second = worker(db, { await: ["lead"] });
    const result = await second.result("lead");
    expect(result).toMatchObject({ status: "succeeded", value: { steps: 2 } });
    expect((result.value as { text: string }).text).toContain(`order ${order} shipped on a Tuesday`);
    await second.finished();
    expect(await storeOf(observer).getRun(child!.id)).toMatchObject({ status: "succeeded", recoveries: 1 });
    // The lead was waiting for its child (unloaded, ARCHITECTURE 6): it resumed, it was not recovered.
    expect((await storeOf(observer).getRun("lead"))!.status).toBe("succeeded");
    // Only the researcher's call that was in flight at the kill was asked twice.
    expect(asked(llm!.requests(), order).map(([id, n]) => [id.split(" ")[0], n])).toEqual([
      ["lead-model", 1],
      ["lead-model", 1],
      ["researcher-model", 1],
      ["researcher-model", 2],
    ]);
    expect([await modelCalls(observer, "lead"), await modelCalls(observer, child!.id)]).toEqual([2, 2]);
    // The child's spending is charged to the lead's budget too; the call cut off by the kill is not.
    expect([await modelCallsSpent(observer, "lead"), await modelCallsSpent(observer, child!.id)]).toEqual([4, 2]);
    expect(ledgerLines(ledger, "search")).toEqual([`${child!.id}:${await searchSeq(observer, child!.id)}`]);
  });

  it("killed mid-stream: the stream is rebuilt, and readers see the recorded answer exactly once", async () => {
    // The mock answers after 100 ms, all at once; the worker's slow network then hands Cairn one
    // word every 40 ms, so the kill lands with part of the answer streamed and none recorded.
    const { db, observer } = await setUp(100);
    const first = worker(db, { start: [{ agent: "storyteller", id: "story", prompt: "Tell the story of order 7505" }], streamDelayMs: 40 });
    await first.line(/^started story$/);
    // A reader here, following the stream across the crash.
    const live: { kind: string; text: string }[] = [];
    const following = (async () => {
      for await (const chunk of observer.stream("story", { signal: AbortSignal.timeout(20_000) })) live.push(chunk);
    })();
    void following.catch(() => undefined); // awaited below; a failure before then is reported there
    const chunkRows = () =>
      storeOf(observer).select<{ kind: string; n: number }>(
        "SELECT kind, count(*) AS n FROM cairn_stream_chunks WHERE run_id = 'story' GROUP BY kind ORDER BY kind",
      );
    await eventually(async () => (await chunkRows()).some((r) => r.kind === "text" && Number(r.n) >= 3));
    await first.kill();
    const cut = await chunkRows();
    expect(cut.map((r) => r.kind)).toEqual(["reset", "text"]);
    expect(Number(cut[1]!.n)).toBeLessThan(STORY.split(" ").length);
    expect(await modelCalls(observer, "story")).toBe(0);

    const second = worker(db, { await: ["story"], streamDelayMs: 5 });
    expect(await second.result("story")).toEqual({ status: "succeeded", value: STORY });
    await second.finished();
    await within(following, 10_000, "the live reader to finish");

    const read: { kind: string; text: string }[] = [];
    for await (const chunk of observer.stream("story", { signal: AbortSignal.timeout(10_000) })) read.push(chunk);
    for (const chunks of [live, read]) {
      // A reader drops what it has of a call when a new attempt at it begins (a reset).
      const afterReset = chunks.slice(chunks.map((c) => c.kind).lastIndexOf("reset") + 1);
      expect(
        afterReset
          .filter((c) => c.kind === "text")
          .map((c) => c.text)
          .join(""),
      ).toBe(STORY);
      expect(chunks.filter((c) => c.kind === "finish")).toHaveLength(1);
      expect(chunks.at(-1)!.kind).toBe("finish");
    }
    // Asked once by the killed worker (the answer was never recorded) and once after the restart.
    expect(llm!.requests().filter((r) => r.model === "story-model")).toHaveLength(2);
    const calls = await storeOf(observer).select<{ streamed: number; text_excerpt: string }>(
      "SELECT streamed, text_excerpt FROM cairn_model_calls WHERE run_id = 'story'",
    );
    expect(calls.map((c) => [Number(c.streamed), c.text_excerpt])).toEqual([[1, STORY]]);
  });

  it("an old owner frozen mid-stream past its lease cannot write into the stream its successor rebuilt", async () => {
    const { db, observer } = await setUp();
    // Providers are not deterministic: the old owner's attempt got another answer than the record.
    other = await startMockLlm({ script: { rules: [{ reply: { content: "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu." } }] } });
    const prompt = "Tell the story of order 7606";
    // It awaits nothing and stays up until told to stop.
    const old = worker(db, {
      start: [{ agent: "storyteller", id: "zombie", prompt }],
      await: [],
      stay: true,
      streamDelayMs: 60,
      leaseMs: 500,
      llm: other.url,
    });
    await old.count(/^part /, 3);
    await freezeOutsideWrites(old, observer, db);
    const successor = worker(db, { await: ["zombie"], leaseMs: 500 });
    expect(await successor.result("zombie")).toEqual({ status: "succeeded", value: STORY });
    await successor.finished();

    // Back from its freeze, the old owner hands its next part to Cairn, then shuts down (draining
    // its commits): its live chunk is fenced out, and the stream stays the recorded answer.
    const handed = old.lines.filter((l) => l.startsWith("part ")).length;
    old.resume();
    await old.count(/^part /, handed + 1);
    process.kill(old.pid, "SIGTERM");
    await old.line(/^stopped$/);
    const text: string[] = [];
    for await (const chunk of observer.stream("zombie", { signal: AbortSignal.timeout(10_000) }))
      text.push(chunk.kind === "finish" ? "<finish>" : chunk.text);
    expect(text.join("")).toBe(`${STORY}<finish>`);
    const rows = await storeOf(observer).select<{ n: number }>("SELECT count(*) AS n FROM cairn_stream_chunks WHERE run_id = 'zombie'");
    expect(Number(rows[0]!.n)).toBe(STORY.split(" ").length + 2); // reset, the words, finish
  });
});

/** The process is stopped (state T in /proc; elsewhere, trust the signal). */
function stopped(pid: number): boolean {
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return true;
  return /^\d+ \(.*\) T /.test(readFileSync(stat, "utf8"));
}

/**
 * The run's tool calls, each with the position (0, 1, ...) among the run's model calls of the call
 * it names as having asked for it (`model_seq`), or null when that call's record does not list it.
 */
async function provenance(cairn: Cairn, runId: string): Promise<[string, number | null][]> {
  const tools = await storeOf(cairn).select<{ tool_name: string; tool_call_id: string; model_seq: number | null }>(
    "SELECT tool_name, tool_call_id, model_seq FROM cairn_tool_calls WHERE run_id = $1 ORDER BY seq",
    [runId],
  );
  const calls = await storeOf(cairn).select<{ seq: number; tool_call_ids: string }>(
    "SELECT seq, tool_call_ids FROM cairn_model_calls WHERE run_id = $1 ORDER BY seq",
    [runId],
  );
  return tools.map((t) => {
    const turn = calls.findIndex((c) => Number(c.seq) === Number(t.model_seq));
    const asks = turn >= 0 && (JSON.parse(calls[turn]!.tool_call_ids) as string[]).includes(t.tool_call_id);
    return [t.tool_name, asks ? turn : null];
  });
}

async function modelCallsSpent(cairn: Cairn, runId: string): Promise<number> {
  const rows = await storeOf(cairn).select<{ n: number }>("SELECT model_calls_spent AS n FROM cairn_budgets WHERE run_id = $1", [runId]);
  return Number(rows[0]!.n);
}

async function searchSeq(cairn: Cairn, runId: string): Promise<number> {
  const rows = await storeOf(cairn).select<{ seq: number }>("SELECT seq FROM cairn_tool_calls WHERE run_id = $1 AND tool_name = 'search'", [runId]);
  return Number(rows[0]!.seq);
}
