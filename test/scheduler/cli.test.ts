import { describe, expect, it } from "vitest";
import type { RunHandle } from "../../src/index.js";
import { runtimeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { cli, expectOk } from "../cli/cli.js";

// `cairn executors`, `cairn queues` and `cairn runs --queue` read the scheduler's tables (built CLI).
describe.each(BACKENDS)("scheduler CLI on $name", (backend) => {
  const env = cairnFactory(backend);

  it("shows executors with capacity and queues, queues with depth and running, runs of one queue", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 30, maxConcurrentRuns: 7, serve: { partitions: ["eu"] } });
    cairn.queue("emails", { concurrency: 1, rateLimit: { limit: 100, periodMs: 1000 } });
    cairn.queue("other");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const job = cairn.workflow("job", async (ctx, n: number) => ctx.step("s", async () => (await gate, n)));
    await cairn.launch();
    const handles: RunHandle<unknown>[] = [];
    // Ids that sort in enqueue order: FIFO breaks a tie of one millisecond by run id.
    for (let i = 0; i < 3; i++) handles.push(await job.enqueue("emails", i, { id: `email-${i}` }));
    const started = await job.start(9);
    await eventually(async () => (await handles[0]!.status()).status === "running");

    const executors = await cli(["executors", "--database", db, "--json"]);
    expectOk(executors);
    const [me] = JSON.parse(executors.stdout);
    expect(me).toMatchObject({ id: runtimeOf(cairn).executorId, capacity: 7, queues: ["emails", "other"], partitions: ["eu"] });
    expect(me.inUse).toBe(2); // one queued run, one started
    expect(me.heartbeatAgeMs).toBeGreaterThanOrEqual(0);
    const executorsTable = await cli(["executors", "--database", db]);
    expect(executorsTable.stdout).toMatch(/CAPACITY[\s\S]*HEARTBEAT AGE/);

    const queues = await cli(["queues", "--database", db, "--json"]);
    expectOk(queues);
    const [emails, other] = JSON.parse(queues.stdout);
    expect(emails).toMatchObject({ name: "emails", policy: "fifo", depth: 2, running: 1, concurrency: 1, dispatchedLastMinute: 1 });
    expect(emails.oldestWaitingAt).toBeTypeOf("number");
    expect(other).toMatchObject({ name: "other", depth: 0, running: 0, oldestWaitingAt: null });
    expect((await cli(["queues", "--database", db])).stdout).toMatch(/emails\s+fifo\s+2\s+1\s+concurrency 1, 100\/1000ms/);

    const runs = await cli(["runs", "--database", db, "--queue", "emails", "--json"]);
    expectOk(runs);
    expect(
      JSON.parse(runs.stdout)
        .map((r: { id: string }) => r.id)
        .sort(),
    ).toEqual(handles.map((h) => h.id).sort());
    const none = await cli(["runs", "--database", db, "--queue", "other"]);
    expect(none.stdout).toMatch(/no runs/);
    release();
    await Promise.all([...handles, started].map((h) => h.result()));
  });
});
