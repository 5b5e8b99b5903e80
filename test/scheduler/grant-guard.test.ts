import { createHash } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GrantGuard, MARK_INTERVAL_MS } from "../../src/scheduler/grant-guard.js";
import { Queues } from "../../src/scheduler/queues.js";
import { wakeOf } from "../../src/scheduler/wake-payloads.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * On PostgreSQL an enqueue that decides its own run sends the run's row with its NOTIFY
 * (`granted:`), and the executor starts the run from it without reading it. A NOTIFY may arrive
 * after a read of the same run loaded it here and ran it to its end: started again from the
 * NOTIFY's row, its steps would run twice. GrantGuard notes every load and refuses a grant of a
 * noted run until a marker sent after the load comes back (src/scheduler/grant-guard.ts).
 */
/** The token an enqueue makes for a grant of `runId` to the executor whose guard this is. */
function tokenFor(guard: GrantGuard, runId: string): string {
  return createHash("sha256")
    .update(guard.grantKey + runId)
    .digest("hex");
}

describe("GrantGuard", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("refuses a grant of a run loaded here until a marker sent after the load comes back", async () => {
    vi.useFakeTimers();
    const sent: string[] = [];
    const guard = new GrantGuard(
      async (payload) => void sent.push(payload),
      (error) => {
        throw error;
      },
    );
    expect(guard.mayStart("a", tokenFor(guard, "a"))).toBe(true);
    guard.loaded("a");
    expect(guard.mayStart("a", tokenFor(guard, "a"))).toBe(false);
    expect(guard.mayStart("b", tokenFor(guard, "b"))).toBe(true);
    // No marker before the interval: a grant is normally heard within milliseconds of its commit.
    await vi.advanceTimersByTimeAsync(MARK_INTERVAL_MS - 1);
    expect(sent).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(1);
    expect(wakeOf(sent[0])).toEqual({ kind: "mark", key: guard.key, marker: 1 });
    // Loaded after marker 1 was sent: only a later marker clears it.
    guard.loaded("b");
    guard.heard(1);
    expect(guard.mayStart("a", tokenFor(guard, "a"))).toBe(true);
    expect(guard.mayStart("b", tokenFor(guard, "b"))).toBe(false);
    await vi.advanceTimersByTimeAsync(MARK_INTERVAL_MS);
    expect(wakeOf(sent[1])).toEqual({ kind: "mark", key: guard.key, marker: 2 });
    guard.heard(2);
    expect(guard.mayStart("b", tokenFor(guard, "b"))).toBe(true);
    // Nothing noted, nothing sent.
    await vi.advanceTimersByTimeAsync(5 * MARK_INTERVAL_MS);
    expect(sent).toHaveLength(2);
    guard.stop();
  });

  it("refuses a grant whose token was not made with its key (a NOTIFY anyone could send)", () => {
    const guard = new GrantGuard(
      async () => undefined,
      () => undefined,
    );
    const other = new GrantGuard(
      async () => undefined,
      () => undefined,
    );
    expect(guard.mayStart("a", tokenFor(guard, "a"))).toBe(true);
    expect(guard.mayStart("a", tokenFor(other, "a"))).toBe(false);
    expect(guard.mayStart("a", tokenFor(guard, "b"))).toBe(false);
    expect(guard.mayStart("a", "")).toBe(false);
    expect(guard.mayStart("a", "not hex at all")).toBe(false);
    guard.stop();
    other.stop();
  });

  it("keeps notes made while a marker is in flight for the next one, and survives a marker that fails", async () => {
    vi.useFakeTimers();
    const errors: unknown[] = [];
    let fail = true;
    const sent: string[] = [];
    const guard = new GrantGuard(
      async (payload) => {
        if (fail) throw new Error("connection lost");
        sent.push(payload);
      },
      (error) => void errors.push(error),
    );
    guard.loaded("a");
    await vi.advanceTimersByTimeAsync(MARK_INTERVAL_MS);
    expect(errors).toHaveLength(1);
    fail = false;
    await vi.advanceTimersByTimeAsync(MARK_INTERVAL_MS);
    expect(wakeOf(sent[0])).toEqual({ kind: "mark", key: guard.key, marker: 2 });
    guard.heard(2);
    expect(guard.mayStart("a", tokenFor(guard, "a"))).toBe(true);
    guard.stop();
  });
});

describe.each(BACKENDS)("runs granted with their rows on $name", (backend) => {
  const env = cairnFactory(backend);

  afterEach(() => {
    vi.restoreAllMocks();
  });

  async function declare(db: string) {
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 1 });
    const effects: string[] = [];
    const send = cairn.workflow("send", async (ctx, input: { to: string }) =>
      ctx.step("send", async () => {
        effects.push(input.to);
        return `sent to ${input.to}`;
      }),
    );
    await cairn.launch();
    return { cairn, send, effects };
  }

  async function listen(db: string): Promise<{ payloads: string[]; client: pg.Client }> {
    const client = new pg.Client({ connectionString: db });
    await client.connect();
    const payloads: string[] = [];
    client.on("notification", (n) => payloads.push(n.payload ?? ""));
    await client.query("LISTEN cairn_wake");
    return { payloads, client };
  }

  it("starts a run granted by its enqueue without reading the runs given to the executor", async () => {
    if (backend.name !== "postgres") return; // SQLite has no NOTIFY: an enqueue pokes its executor in-process
    const db = await backend.freshDatabase();
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 1 });
    const reads = vi.spyOn(Queues.prototype, "assigned");
    let readsBeforeStart = -1;
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => {
      readsBeforeStart = reads.mock.calls.length;
      return ctx.step("send", async () => `sent to ${input.to}`);
    });
    await cairn.launch();
    // The passes launch() asked for read our assigned runs (a claiming pass does): let them end —
    // until no read has come for a while.
    await eventually(() => reads.mock.calls.length > 0);
    for (let seen = -1; seen !== reads.mock.calls.length;) {
      seen = reads.mock.calls.length;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    reads.mockClear();
    const { payloads, client } = await listen(db);
    try {
      const handle = await send.enqueue("mail", { to: "ada@example.com" }, { id: "mail-granted" });
      expect(await handle.result()).toBe("sent to ada@example.com");
      // The enqueue granted the run (its NOTIFY carries the row), and the executor read nothing.
      expect(await eventually(() => payloads.find((p) => p.startsWith("dispatched:")))).toContain(",\n");
    } finally {
      await client.end();
    }
    expect(readsBeforeStart).toBe(0);
  });

  it("never starts a run again from a grant that arrives after the run was loaded here", async () => {
    if (backend.name !== "postgres") return;
    const db = await backend.freshDatabase();
    const { send, effects, cairn } = await declare(db);
    const { payloads, client } = await listen(db);
    try {
      // No marker comes back during the test: the note of the run's load stays (a marker would
      // clear it, rightly, since the run's one grant would have arrived before it).
      vi.spyOn(GrantGuard.prototype, "heard").mockImplementation(() => undefined);
      const handle = await send.enqueue("mail", { to: "bo@example.com" }, { id: "mail-late" });
      expect(await handle.result()).toBe("sent to bo@example.com");
      const grant = await eventually(() => payloads.find((p) => p.includes(",\n")));
      // The same grant once more, as a NOTIFY delayed past the run's end would arrive.
      await client.query("SELECT pg_notify('cairn_wake', $1)", [grant]);
      await eventually(() => payloads.filter((p) => p === grant).length === 2);
      // Another wake-up through the same channel after it: heard means the grant was heard first.
      await client.query("SELECT pg_notify('cairn_wake', 'queue:mail')");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(effects).toEqual(["bo@example.com"]);
      const { rows } = await cairn.query("SELECT status, executor_id FROM cairn_runs WHERE id = 'mail-late'");
      expect(rows[0]).toMatchObject({ status: "succeeded", executor_id: null });
    } finally {
      await client.end();
    }
  });

  it("starts nothing from a forged grant (anyone who can connect can NOTIFY)", async () => {
    if (backend.name !== "postgres") return;
    const db = await backend.freshDatabase();
    const { send, effects, cairn } = await declare(db);
    const { payloads, client } = await listen(db);
    try {
      const handle = await send.enqueue("mail", { to: "ada@example.com" }, { id: "mail-real" });
      expect(await handle.result()).toBe("sent to ada@example.com");
      const grant = await eventually(() => payloads.find((p) => p.includes(",\n")));
      const [head, , rowText] = grant.split("\n");
      const row = JSON.parse(rowText!) as Record<string, unknown>;
      // A run that does not exist, for the same executor, with the forger's input and a made-up token.
      const forged = { ...row, id: "forged-1", input: null, input_text: JSON.stringify({ to: "eve@example.com" }) };
      await client.query("SELECT pg_notify('cairn_wake', $1)", [`${head}\n${"ab".repeat(32)}\n${JSON.stringify(forged)}`]);
      // The real token of another run does not prove this one either.
      const [, realToken] = grant.split("\n");
      await client.query("SELECT pg_notify('cairn_wake', $1)", [`${head}\n${realToken}\n${JSON.stringify({ ...forged, id: "forged-2" })}`]);
      await eventually(() => payloads.filter((p) => p.includes("forged-")).length === 2);
      await client.query("SELECT pg_notify('cairn_wake', 'queue:mail')");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(effects).toEqual(["ada@example.com"]);
      const { rows } = await cairn.query("SELECT id FROM cairn_runs ORDER BY id");
      expect(rows.map((r) => r.id)).toEqual(["mail-real"]);
    } finally {
      await client.end();
    }
  });
});
