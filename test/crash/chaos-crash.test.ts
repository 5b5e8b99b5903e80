import { describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { readLedger, seededRandom, tally, workerFactory } from "./crash-harness.js";
import { storeOf } from "../../src/internal.js";

/**
 * The fixture's `mixed` workflow over 20 rounds: 20 steps plus 4 pairs of parallel steps, 5 short
 * sleeps, 5 messages to itself, 5 receives that time out, 5 child runs of 3 steps, recorded time
 * and ids. Its output's total is 0+1+...+19 plus 3 per pair.
 */
const ROUNDS = 20;
const OUTPUT = { rounds: ROUNDS, total: 190 + 4 * 3 };
const CHILDREN_PER_RUN = 5;
const MESSAGES_PER_RUN = 5;

describe.each(BACKENDS)("SIGKILL at random moments with every kind of operation in flight on $name", (backend) => {
  const env = cairnFactory(backend);
  const workers = workerFactory();

  it("8 runs, 5 kills: all runs and children finish, nothing committed runs again, every message consumed once", async () => {
    const seed = Number(process.env.CAIRN_CRASH_SEED ?? 7);
    const random = seededRandom(seed + (backend.name === "postgres" ? 1 : 0));
    const kills = Number(process.env.CAIRN_CRASH_KILLS ?? 5);
    const db = await env.database();
    const ledger = workers.ledger();
    const ids = Array.from({ length: 8 }, (_, i) => `mix-${i}`);
    // Every worker starts the runs: a start is idempotent by id, and a worker may die before it
    // has started them all.
    const start = ids.map((id) => ({ workflow: "mixed" as const, id, input: { rounds: ROUNDS } }));
    let observer: Cairn | undefined;
    /** Start-line counts of every step whose checkpoint was committed when a worker died. */
    const frozen = new Map<string, number>();
    let killedMidRun = 0;
    let worker = workers.spawn({ database: db, ledger, start });
    for (let k = 0; k < kills; k++) {
      await worker.time("launched");
      // A seeded 5..124 ms after launch: during recovery, steps, commits, sleeps or waits.
      const delayMs = 5 + Math.floor(random() * 120);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      await worker.kill();
      observer ??= env.cairn(db);
      const runs = await storeOf(observer).listRuns({ limit: 1000 });
      if (runs.length < ids.length * (1 + CHILDREN_PER_RUN) || runs.some((r) => r.status !== "succeeded")) killedMidRun++;
      const starts = tally(readLedger(ledger), "start");
      for (const run of runs) {
        for (const row of await storeOf(observer).loadJournal(run.id)) {
          if (row.kind === "step") frozen.set(`${run.id} ${row.seq}`, starts.get(`${run.id} ${row.seq}`) ?? 0);
        }
      }
      worker = workers.spawn({ database: db, ledger, start });
    }
    for (const id of ids) expect(await worker.result(id, 30_000), `seed ${seed}: ${id}`).toEqual({ status: "succeeded", value: OUTPUT });
    await worker.finished();
    expect(killedMidRun, `seed ${seed}: kills that found work unfinished`).toBeGreaterThan(0);

    const store = storeOf(observer!);
    const entries = readLedger(ledger);
    const starts = tally(entries, "start");
    for (const [step, count] of frozen) expect(starts.get(step), `seed ${seed}: ${step} was committed, then ran again`).toBe(count);
    const runs = await store.listRuns({ limit: 1000 });
    expect(runs.length).toBe(ids.length * (1 + CHILDREN_PER_RUN));
    expect(runs.filter((r) => r.status !== "succeeded").map((r) => r.id)).toEqual([]);
    for (const run of runs) {
      const journal = await store.loadJournal(run.id);
      expect(
        journal.map((row) => row.seq),
        `seed ${seed}: journal of ${run.id}`,
      ).toEqual(journal.map((_, i) => i));
      expect(journal.filter((row) => row.status !== "succeeded").map((r) => r.seq)).toEqual([]);
    }
    const messages = await store.query("SELECT id, run_id, consumed_by FROM cairn_messages");
    expect(messages.rows.length).toBe(ids.length * MESSAGES_PER_RUN);
    // Sent by the run to itself (id runId:seq) and consumed by one of its own receives.
    for (const m of messages.rows) expect(String(m.consumed_by).startsWith(`${String(m.run_id)}:`), `message ${String(m.id)}`).toBe(true);
    expect(new Set(messages.rows.map((m) => m.consumed_by)).size).toBe(messages.rows.length);
    const done = tally(entries, "done");
    for (const [step, count] of done) expect(count, `seed ${seed}: done lines of ${step}`).toBeLessThanOrEqual(1 + kills);
    expect(entries.every((e) => e.key === `${e.runId}:${e.seq}`)).toBe(true);
  });
});
