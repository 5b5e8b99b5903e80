import pg from "pg";
import { describe, expect, it } from "vitest";
import type { WorkflowContext } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { storeOf } from "../../src/internal.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * A dispatch wakes the executor it gave runs to, not every executor: on PostgreSQL each executor
 * records its session's own NOTIFY channel with the queues it serves (`cairn_executor_queues.
 * wake_channel`), and the dispatch notifies that channel. An executor without one (an older
 * Cairn's, or one registered while its session was lost) hears of it on the shared `cairn_wake`.
 * A client's start wakes one executor likewise (on its channel, recorded in `cairn_executors.
 * wake_channel`), which passes the wake-up on to every executor when it cannot take the run.
 * Polls are a minute apart here: a run that starts at once was woken.
 */
describe.each(BACKENDS)("wake channels on $name", (backend) => {
  const env = cairnFactory(backend);

  async function fleet(db: string) {
    // A dispatcher that serves no queue (its passes give runs to peers only) and a worker. The
    // dispatcher runs another version (so a start never wakes it alone) and knows no workflow.
    const dispatcher = env.cairn(db, { pollIntervalMs: 60_000, serve: { queues: [] }, appVersion: "dispatcher" });
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
    return payloads.filter((p) => / (dispatched:|queue:|claimable$|claim$)/.test(p));
  }

  it("records each executor's own channel with the queues it serves (PostgreSQL), none on SQLite; each executor's name as a parker", async () => {
    const db = await env.database();
    const { channel, backendPid } = await fleet(db);
    expect(channel).toBe(backend.name === "postgres" ? `cairn_wake_${String(backendPid)}` : null);
    const { rows } = await env.cairn(db).query("SELECT backend_pid, wake_channel, workflows FROM cairn_executors ORDER BY app_version");
    expect(rows).toHaveLength(2);
    // SQLite has no channels: an executor's row carries its store's name as the parker of its runs
    // (Store.ownParker), one per executor.
    for (const row of rows) {
      expect(row.wake_channel).toMatch(backend.name === "postgres" ? new RegExp(`^cairn_wake_${String(row.backend_pid)}$`) : /^sqlite_[0-9a-f]{16}$/);
    }
    expect(new Set(rows.map((row) => row.wake_channel)).size).toBe(2);
    // The workflows each had registered: the worker's, then the dispatcher's (none).
    expect(rows.map((row) => JSON.parse(String(row.workflows)) as unknown)).toEqual([["job"], []]);
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

  it.skipIf(backend.name !== "postgres")(
    "a start wakes one executor of its version, which claims it at once and still dispatches the queue after",
    async () => {
      const db = await env.database();
      const { channel, workerId, send } = await fleet(db);
      const client = env.cairn(db);
      const plain = client.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
      const started = await heard(db, ["cairn_wake", channel!], async () => {
        const handle = await plain.start(3, { id: "started" });
        expect(await handle.result()).toBe(6); // claimed by the worker (polls are a minute apart)
      });
      expect(started).toEqual([`${channel} claim`]);
      // The passes that claimed it dispatched nothing; an enqueue after them is dispatched as ever.
      const enqueued = await heard(db, ["cairn_wake", channel!], async () => {
        const handle = await send.enqueue("jobs", 4, { id: "after", dedupKey: "after" });
        expect(await handle.result()).toBe(8);
      });
      expect(enqueued).toEqual([`${channel} dispatched:${workerId}`]);
    },
  );

  /** An executor a client's start can pick (the only one of the client's version), and a taker of another version that claims every version's runs. */
  async function pickedAndTaker(db: string, picked: { knowsJob: boolean; maxConcurrentRuns?: number }) {
    const pick = env.cairn(db, { pollIntervalMs: 60_000, appVersion: "v1", maxConcurrentRuns: picked.maxConcurrentRuns ?? 8 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const hold = pick.workflow("hold", async (ctx) => ctx.step("wait", () => gate.then(() => "released")));
    if (picked.knowsJob) pick.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    const taker = env.cairn(db, { pollIntervalMs: 60_000, appVersion: "v2", recoverAllVersions: true });
    taker.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    await pick.launch();
    await taker.launch();
    const { rows } = await pick.query("SELECT app_version, wake_channel FROM cairn_executors ORDER BY app_version");
    expect(rows.map((r) => r.app_version)).toEqual(["v1", "v2"]);
    const client = env.cairn(db, { appVersion: "v1" });
    const job = client.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    return { hold, release, job, pickedChannel: rows[0]!.wake_channel as string, takerChannel: rows[1]!.wake_channel as string };
  }

  it.skipIf(backend.name !== "postgres")("a start wakes only an executor that registered its workflow; with none, every executor", async () => {
    const db = await env.database();
    const { job, pickedChannel, takerChannel } = await pickedAndTaker(db, { knowsJob: false });
    // No executor of v1 knows "job": the start tells everyone, and the taker (all versions) claims it.
    const none = await heard(db, ["cairn_wake", pickedChannel, takerChannel], async () => {
      expect(await (await job.start(1, { id: "job-1" })).result()).toBe(2); // polls are a minute apart
    });
    expect(none).toEqual(["cairn_wake claimable"]);
    // One that does joins: every start goes to it alone, never to the other executor of v1.
    const knowing = env.cairn(db, { pollIntervalMs: 60_000, appVersion: "v1" });
    knowing.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    await knowing.launch();
    const { rows } = await knowing.query("SELECT wake_channel FROM cairn_executors WHERE workflows LIKE '%job%' AND app_version = 'v1'");
    const knowingChannel = String(rows[0]!.wake_channel);
    for (const n of [2, 3, 4]) {
      const wakes = await heard(db, ["cairn_wake", pickedChannel, takerChannel, knowingChannel], async () => {
        expect(await (await job.start(n, { id: `job-${n}` })).result()).toBe(n * 2);
      });
      expect(wakes).toEqual([`${knowingChannel} claim`]);
    }
  });

  it.skipIf(backend.name !== "postgres")("an executor woken alone that is full passes the wake-up on; one with room does not", async () => {
    const db = await env.database();
    const { hold, release, job, pickedChannel, takerChannel } = await pickedAndTaker(db, { knowsJob: true, maxConcurrentRuns: 2 });
    // Both run in the picked executor's process: its two slots.
    const held = [await hold.start(undefined, { id: "held-1" }), await hold.start(undefined, { id: "held-2" })];
    const full = await heard(db, ["cairn_wake", pickedChannel, takerChannel], async () => {
      expect(await (await job.start(5, { id: "while-full" })).result()).toBe(10);
    });
    expect(full).toEqual([`${pickedChannel} claim`, "cairn_wake claimable"]);
    release();
    for (const handle of held) expect(await handle.result()).toBe("released");
    const roomy = await heard(db, ["cairn_wake", pickedChannel, takerChannel], async () => {
      expect(await (await job.start(6, { id: "with-room" })).result()).toBe(12);
    });
    // It took the run with a slot to spare: nothing was left for the others, so nobody else woke.
    expect(roomy).toEqual([`${pickedChannel} claim`]);
  });

  it.skipIf(backend.name !== "postgres")("a wake-up is passed on only while a started run of that version is still claimable", async () => {
    const db = await env.database();
    // Another version, knowing no workflow: it claims nothing, and no start wakes it alone.
    const host = env.cairn(db, { appVersion: "host" });
    await host.launch();
    const client = env.cairn(db, { appVersion: "v1" });
    client.queue("jobs", { workerConcurrency: 1 }); // declared, served by nobody: its runs wait, held
    const job = client.workflow("job", async (ctx, n: number) => ctx.step("double", () => n * 2));
    const passOn = (version: string) =>
      heard(db, ["cairn_wake"], () => storeOf(host).capabilities.wakeNotifications!.passOnClaimable(version, Date.now()));
    const started = await job.start(1, { id: "started" });
    expect(await passOn("v1")).toEqual(["cairn_wake claimable"]);
    expect(await passOn("v2")).toEqual([]); // nobody of v2 could take it
    await started.cancel(); // as if a peer had taken it: nothing left to pass on
    expect(await passOn("v1")).toEqual([]);
    await job.enqueue("jobs", 2, { id: "queued" }); // enqueued, but its queue's to dispatch, not a claim's
    expect(await passOn("v1")).toEqual([]);
  });

  it.skipIf(backend.name !== "postgres")(
    "a message to a waiting run wakes only the executor that parked it; with that one gone, every executor",
    async () => {
      const db = await env.database();
      const inbox = async (ctx: WorkflowContext) => {
        let sum = 0;
        for (let i = 0; i < 3; i++) sum += (await ctx.recv<number>("n")) ?? 0;
        return sum;
      };
      const executors = [env.cairn(db, { pollIntervalMs: 60_000 }), env.cairn(db, { pollIntervalMs: 60_000 })];
      for (const executor of executors) executor.workflow("inbox", inbox);
      for (const executor of executors) await executor.launch();
      const client = env.cairn(db);
      const handle = await client.workflow("inbox", inbox).start(undefined, { id: "inbox" });
      const channels = executors.map((executor) => storeOf(executor).capabilities.wakeNotifications!.currentOwnChannel()!);
      /** The channel the run was parked with, once it has taken `consumed` messages and waits again. */
      const parkedOn = (consumed: number) =>
        eventually(async () => {
          const [run] = (
            await client.query(
              `SELECT status, wake_channel, (SELECT count(*) FROM cairn_messages WHERE run_id = 'inbox' AND consumed_at IS NOT NULL) AS consumed
               FROM cairn_runs WHERE id = 'inbox'`,
            )
          ).rows;
          const parked = run?.status === "waiting" && Number(run.consumed) === consumed && channels.includes(String(run.wake_channel));
          return parked ? String(run.wake_channel) : undefined;
        });
      const parker = await parkedOn(0);
      for (const n of [1, 2]) {
        const wakes = await heard(db, ["cairn_wake", ...channels], () => client.send("inbox", "n", n));
        expect(wakes).toEqual([`${parker} claim`]);
        expect(await parkedOn(n)).toBe(parker); // it took the message, and parked the run again
      }
      // The parker leaves: its row goes, and the last message wakes everyone; the other takes the run.
      await executors[channels.indexOf(parker)]!.shutdown();
      const last = await heard(db, ["cairn_wake", ...channels], () => client.send("inbox", "n", 3));
      expect(last).toEqual(["cairn_wake claimable"]);
      expect(await handle.result()).toBe(6); // polls are a minute apart: the wake-up did it
    },
  );

  it.skipIf(backend.name !== "postgres")("a child's end wakes the executor that parked its parent", async () => {
    const db = await env.database();
    const declare = (cairn: ReturnType<typeof env.cairn>) => {
      const child = cairn.workflow("child", async (ctx) => (await ctx.recv<number>("go")) ?? 0);
      return cairn.workflow("parent", async (ctx) => (await (await ctx.child(child, undefined, { id: "kid" })).result()) + 1);
    };
    const executors = [env.cairn(db, { pollIntervalMs: 60_000 }), env.cairn(db, { pollIntervalMs: 60_000 })];
    for (const executor of executors) declare(executor);
    for (const executor of executors) await executor.launch();
    const channels = executors.map((executor) => storeOf(executor).capabilities.wakeNotifications!.currentOwnChannel()!);
    const client = env.cairn(db);
    const handle = await declare(client).start(undefined, { id: "mom" });
    // Both wait: the parent for its child, the child (claimed by either executor) for "go".
    const parked = await eventually(async () => {
      const { rows } = await client.query("SELECT id, status, wake_channel FROM cairn_runs ORDER BY id");
      return rows.length === 2 && rows.every((row) => row.status === "waiting") ? rows.map((row) => String(row.wake_channel)) : undefined;
    });
    const [kid, mom] = parked; // ordered by id
    expect(channels).toContain(kid);
    expect(channels).toContain(mom);
    const wakes = await heard(db, ["cairn_wake", ...channels], async () => {
      await client.send("kid", "go", 41);
      expect(await handle.result()).toBe(42); // polls are a minute apart: the wake-ups did it
    });
    // The message woke the child's parker; the child's end woke the parent's.
    expect(wakes).toEqual([`${kid} claim`, `${mom} claim`]);
  });
});
