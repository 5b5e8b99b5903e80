import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/**
 * A dispatch wakes the executor it gave runs to, not every executor: on PostgreSQL each executor
 * records its session's own NOTIFY channel with the queues it serves (`cairn_executor_queues.
 * wake_channel`), and the dispatch notifies that channel. An executor without one (an older
 * Cairn's, or one registered while its session was lost) hears of it on the shared `cairn_wake`.
 * Polls are a minute apart here: a run that starts at once was woken.
 */
describe.each(BACKENDS)("wake channels on $name", (backend) => {
  const env = cairnFactory(backend);

  async function fleet(db: string) {
    // A dispatcher that serves no queue (its passes give runs to peers only) and a worker.
    const dispatcher = env.cairn(db, { pollIntervalMs: 60_000, serve: { queues: [] } });
    dispatcher.queue("jobs", { workerConcurrency: 4 });
    const worker = env.cairn(db, { pollIntervalMs: 60_000 });
    worker.queue("jobs", { workerConcurrency: 4 });
    const job = worker.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    const producer = env.cairn(db);
    producer.queue("jobs", { workerConcurrency: 4 });
    const send = producer.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    await dispatcher.launch();
    await worker.launch();
    const { rows } = await worker.query(
      "SELECT e.id, e.backend_pid, eq.wake_channel FROM cairn_executors e JOIN cairn_executor_queues eq ON eq.executor_id = e.id",
    );
    expect(rows).toHaveLength(1); // the worker's: the dispatcher serves nothing
    return { worker, job, send, workerId: String(rows[0]!.id), backendPid: rows[0]!.backend_pid, channel: rows[0]!.wake_channel as string | null };
  }

  /** Payloads heard on `channels` while `body` runs, and a little after, as `<channel> <payload>`. */
  async function heard(db: string, channels: string[], body: () => Promise<void>): Promise<string[]> {
    const listener = new pg.Client({ connectionString: db });
    await listener.connect();
    const payloads: string[] = [];
    listener.on("notification", (n) => payloads.push(`${n.channel} ${n.payload ?? ""}`));
    for (const channel of channels) await listener.query(`LISTEN ${channel}`);
    try {
      await body();
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      await listener.end();
    }
    return payloads.filter((p) => / (dispatched:|queue:|claimable$)/.test(p));
  }

  it("records each executor's own channel with the queues it serves (PostgreSQL), none on SQLite", async () => {
    const db = await env.database();
    const { channel, backendPid } = await fleet(db);
    expect(channel).toBe(backend.name === "postgres" ? `cairn_wake_${String(backendPid)}` : null);
  });

  it.skipIf(backend.name !== "postgres")("a dispatch pass wakes only the executor it gave the run to, on that executor's channel", async () => {
    const db = await env.database();
    const { channel, workerId, send } = await fleet(db);
    // A dedup key sends the enqueue through the queue's dispatch function (dispatch-function.ts),
    // whose decision goes to the worker: a peer of whoever dispatched.
    const wakes = await heard(db, ["cairn_wake", channel!], async () => {
      const handle = await send.enqueue("jobs", 21, { id: "one", dedupKey: "one" });
      expect(await handle.result()).toBe(42);
    });
    expect(wakes).toEqual([`${channel} dispatched:${workerId}`]);
    // The enqueue that decides its own run (no dedup key) does the same (enqueue-function.ts).
    const again = await heard(db, ["cairn_wake", channel!], async () => {
      const handle = await send.enqueue("jobs", 4, { id: "two" });
      expect(await handle.result()).toBe(8);
    });
    expect(again).toEqual([`${channel} dispatched:${workerId}`]);
  });

  it.skipIf(backend.name !== "postgres")("an executor with no channel of its own is woken on the shared one", async () => {
    const db = await env.database();
    const { workerId, send } = await fleet(db);
    const admin = new pg.Client({ connectionString: db });
    await admin.connect();
    await admin.query("UPDATE cairn_executor_queues SET wake_channel = NULL");
    await admin.end();
    for (const [id, dedupKey] of [
      ["by-dispatch", "by-dispatch"],
      ["by-enqueue", undefined],
    ] as const) {
      const wakes = await heard(db, ["cairn_wake"], async () => {
        const handle = await send.enqueue("jobs", 5, dedupKey === undefined ? { id } : { id, dedupKey });
        expect(await handle.result()).toBe(10);
      });
      expect(wakes).toEqual([`cairn_wake dispatched:${workerId}`]);
    }
  });

  it.skipIf(backend.name !== "postgres")("a start says `claimable`: executors claim it at once, and still dispatch the queue after", async () => {
    const db = await env.database();
    const { channel, workerId, send } = await fleet(db);
    const client = env.cairn(db);
    const plain = client.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    const started = await heard(db, ["cairn_wake", channel!], async () => {
      const handle = await plain.start(3, { id: "started" });
      expect(await handle.result()).toBe(6); // claimed by the worker (polls are a minute apart)
    });
    expect(started).toEqual(["cairn_wake claimable"]);
    // The passes that claimed it dispatched nothing; an enqueue after them is dispatched as ever.
    const enqueued = await heard(db, ["cairn_wake", channel!], async () => {
      const handle = await send.enqueue("jobs", 4, { id: "after", dedupKey: "after" });
      expect(await handle.result()).toBe(8);
    });
    expect(enqueued).toEqual([`${channel} dispatched:${workerId}`]);
  });
});
