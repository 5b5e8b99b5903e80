import { describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { readLedger, seededRandom, tally, workerFactory } from "./crash-harness.js";
import { storeOf } from "../../src/internal.js";

/** The output of the fixture's `steps` workflow: step i returns i*i. */
/**
 * A takeover by the dead owner's pid comes well before the 15 s lease would let one happen: half of
 * it is the bound (it was 2 s, which a loaded CI machine's boot, migration check and fsyncs can pass).
 */
const HALF_THE_LEASE_MS = 7_500;

const stepsOutput = (n: number) => ({ n, sum: Array.from({ length: n }, (_, i) => i * i).reduce((a, b) => a + b, 0) });

/** The seqs of a run's journal rows, in order. */
async function journalSeqs(cairn: Cairn, runId: string): Promise<number[]> {
  return (await storeOf(cairn).loadJournal(runId)).map((row) => row.seq);
}

describe.each(BACKENDS)("SIGKILL during steps on $name", (backend) => {
  const env = cairnFactory(backend);
  const workers = workerFactory();

  it("killed between steps: no completed step runs again, and the restart resumes at once", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const first = workers.spawn({
      database: db,
      ledger,
      start: [{ workflow: "steps", id: "between", input: { n: 5 } }],
      hang: ["between@between@2"],
    });
    await first.line(/^hang between between 2$/);
    await first.kill();

    const observer = env.cairn(db);
    expect(await journalSeqs(observer, "between")).toEqual([0, 1, 2]);

    const second = workers.spawn({ database: db, ledger, await: ["between"] });
    expect(await second.result("between")).toEqual({ status: "succeeded", value: stepsOutput(5) });
    const bootAt = await second.time("boot");
    await second.finished();

    // ARCHITECTURE 7: the dead owner's pid is gone, so its run is taken over without waiting for
    // the 15 s lease.
    const run = (await storeOf(observer).getRun("between"))!;
    expect(run.finishedAt! - bootAt).toBeLessThan(HALF_THE_LEASE_MS);
    expect(run.recoveries).toBe(1);

    const entries = readLedger(ledger);
    const starts = tally(entries, "start");
    const done = tally(entries, "done");
    for (let seq = 0; seq < 5; seq++) {
      expect(starts.get(`between ${seq}`), `start lines of seq ${seq}`).toBe(1);
      expect(done.get(`between ${seq}`), `done lines of seq ${seq}`).toBe(1);
    }
    const pids = entries.filter((e) => e.kind === "done").map((e) => e.pid);
    expect(pids).toEqual([first.pid, first.pid, first.pid, second.pid, second.pid]);
    expect(await journalSeqs(observer, "between")).toEqual([0, 1, 2, 3, 4]);
  });

  it("killed inside a step after its effect: only that step runs again, with the same idempotency key", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const first = workers.spawn({
      database: db,
      ledger,
      start: [{ workflow: "steps", id: "inside", input: { n: 4 } }],
      hang: ["inside@inside@2"],
    });
    await first.line(/^hang inside inside 2$/);
    await first.kill();

    const observer = env.cairn(db);
    expect(await journalSeqs(observer, "inside")).toEqual([0, 1]);

    const second = workers.spawn({ database: db, ledger, await: ["inside"] });
    expect(await second.result("inside")).toEqual({ status: "succeeded", value: stepsOutput(4) });
    const bootAt = await second.time("boot");
    await second.finished();
    const run = (await storeOf(observer).getRun("inside"))!;
    expect(run.finishedAt! - bootAt).toBeLessThan(HALF_THE_LEASE_MS);

    const entries = readLedger(ledger);
    const done = tally(entries, "done");
    expect(done.get("inside 0")).toBe(1);
    expect(done.get("inside 1")).toBe(1);
    expect(done.get("inside 3")).toBe(1);
    const again = entries.filter((e) => e.kind === "done" && e.seq === 2);
    expect(again.map((e) => e.pid)).toEqual([first.pid, second.pid]);
    expect(again.map((e) => e.key)).toEqual(["inside:2", "inside:2"]);
    const journal = await storeOf(observer).loadJournal("inside");
    expect(journal.map((row) => [row.seq, row.name, row.status])).toEqual([
      [0, "s0", "succeeded"],
      [1, "s1", "succeeded"],
      [2, "s2", "succeeded"],
      [3, "s3", "succeeded"],
    ]);
  });

  it("killed at random moments across 200 commits: contiguous journal, each step done once (+1 per kill at most)", async () => {
    const seed = Number(process.env.CAIRN_CRASH_SEED ?? 20_240_611);
    const random = seededRandom(seed + (backend.name === "postgres" ? 1 : 0));
    const n = 200;
    const kills = 4;
    const db = await env.database();
    const ledger = workers.ledger();
    let observer: Cairn | undefined;
    /** Start-line counts of every step whose checkpoint was committed when a worker died. */
    const frozen = new Map<string, number>();
    let worker = workers.spawn({ database: db, ledger, start: [{ workflow: "steps", id: "many", input: { n } }] });
    for (let k = 0; k < kills; k++) {
      // Each worker dies after a seeded number of its own effects (1..40, so 4 kills never reach
      // the end) plus a seeded 0..4 ms: anywhere between an effect, its checkpoint and the next.
      await worker.count(/^done many /, 1 + Math.floor(random() * 40));
      const delayMs = Math.floor(random() * 5);
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      await worker.kill();
      observer ??= env.cairn(db);
      expect((await storeOf(observer).getRun("many"))!.status, `seed ${seed}: run finished before kill ${k + 1}`).toBe("running");
      const starts = tally(readLedger(ledger), "start");
      for (const seq of await journalSeqs(observer, "many")) frozen.set(`many ${seq}`, starts.get(`many ${seq}`) ?? 0);
      worker = workers.spawn({ database: db, ledger, await: ["many"] });
    }
    expect(await worker.result("many")).toEqual({ status: "succeeded", value: stepsOutput(n) });
    await worker.finished();

    const journal = await storeOf(observer!).loadJournal("many");
    expect(journal.map((row) => row.seq)).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(journal.every((row) => row.status === "succeeded" && row.name === `s${row.seq}`)).toBe(true);
    const counted = await storeOf(observer!).query("SELECT COUNT(*) AS rows, COUNT(DISTINCT seq) AS seqs FROM cairn_steps WHERE run_id = 'many'");
    expect(counted.rows.map((r) => [Number(r.rows), Number(r.seqs)])).toEqual([[n, n]]);

    const entries = readLedger(ledger);
    const starts = tally(entries, "start");
    for (const [step, count] of frozen) expect(starts.get(step), `seed ${seed}: ${step} was committed, then ran again`).toBe(count);
    const done = tally(entries, "done");
    let extra = 0;
    for (let seq = 0; seq < n; seq++) {
      const count = done.get(`many ${seq}`) ?? 0;
      expect(count, `seed ${seed}: done lines of seq ${seq}`).toBeGreaterThanOrEqual(1);
      extra += count - 1;
    }
    expect(extra, `seed ${seed}: re-executed steps`).toBeLessThanOrEqual(kills);
    expect(entries.every((e) => e.key === `many:${e.seq}`)).toBe(true);
  });

  it("killed with 20 runs in flight: all finish and no committed step runs again", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const ids = Array.from({ length: 20 }, (_, i) => `run-${i}`);
    const first = workers.spawn({ database: db, ledger, start: ids.map((id) => ({ workflow: "steps", id, input: { n: 10 } })) });
    await first.count(/^started /, ids.length);
    await first.count(/^done /, 100);
    await first.kill();

    const observer = env.cairn(db);
    const starts = tally(readLedger(ledger), "start");
    const frozen = new Map<string, number>();
    for (const id of ids) {
      for (const seq of await journalSeqs(observer, id)) frozen.set(`${id} ${seq}`, starts.get(`${id} ${seq}`) ?? 0);
    }
    expect(frozen.size).toBeGreaterThan(0);
    expect(frozen.size).toBeLessThan(200);

    const second = workers.spawn({ database: db, ledger, await: ids });
    for (const id of ids) expect(await second.result(id)).toEqual({ status: "succeeded", value: stepsOutput(10) });
    await second.finished();

    const entries = readLedger(ledger);
    const after = tally(entries, "start");
    for (const [step, count] of frozen) expect(after.get(step), `${step} was committed, then ran again`).toBe(count);
    const done = tally(entries, "done");
    for (const id of ids) {
      expect(await journalSeqs(observer, id)).toEqual(Array.from({ length: 10 }, (_, i) => i));
      for (let seq = 0; seq < 10; seq++) {
        // One kill: a step in flight at that moment may have run twice, no step more.
        expect(done.get(`${id} ${seq}`), `done lines of ${id} seq ${seq}`).toBeGreaterThanOrEqual(1);
        expect(done.get(`${id} ${seq}`), `done lines of ${id} seq ${seq}`).toBeLessThanOrEqual(2);
      }
    }
  });
  it("killed inside a transactional step: its writes and its checkpoint commit together, exactly once", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const first = workers.spawn({ database: db, ledger, start: [{ workflow: "txn", id: "tx", input: { n: 4 } }], hang: ["inside@tx@2"] });
    await first.line(/^hang inside tx 2$/);
    await first.kill();

    const observer = env.cairn(db);
    const effects = () => storeOf(observer).query("SELECT seq, pid FROM crash_effects WHERE run_id = 'tx' ORDER BY seq");
    // The body of seq 2 ran and inserted its row, but the transaction never committed.
    expect((await effects()).rows.map((r) => [Number(r.seq), Number(r.pid)])).toEqual([
      [0, first.pid],
      [1, first.pid],
    ]);
    expect(await journalSeqs(observer, "tx")).toEqual([0, 1]);

    const second = workers.spawn({ database: db, ledger, await: ["tx"] });
    expect(await second.result("tx")).toEqual({ status: "succeeded", value: "committed" });
    await second.finished();

    expect((await effects()).rows.map((r) => [Number(r.seq), Number(r.pid)])).toEqual([
      [0, first.pid],
      [1, first.pid],
      [2, second.pid],
      [3, second.pid],
    ]);
    const done = tally(readLedger(ledger), "done");
    expect([0, 1, 2, 3].map((seq) => done.get(`tx ${seq}`))).toEqual([1, 1, 2, 1]);
    expect(await journalSeqs(observer, "tx")).toEqual([0, 1, 2, 3]);
  });

  it("killed while a live peer runs: the peer takes the dead worker's runs over at once", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const ids = ["peer-0", "peer-1", "peer-2"];
    const doomed = workers.spawn({
      database: db,
      ledger,
      start: ids.map((id) => ({ workflow: "steps", id, input: { n: 6 } })),
      hang: ids.map((id) => `inside@${id}@3`),
    });
    await doomed.count(/^hang inside /, ids.length);
    // The peer is up and polling before the kill; it owns nothing yet.
    const peer = workers.spawn({ database: db, ledger, await: ids });
    await peer.line(/^launched \d+$/);
    await doomed.kill();
    const killedAt = Date.now();

    for (const id of ids) expect(await peer.result(id)).toEqual({ status: "succeeded", value: stepsOutput(6) });
    await peer.finished();
    const observer = env.cairn(db);
    for (const id of ids) {
      const run = (await storeOf(observer).getRun(id))!;
      expect(run.finishedAt! - killedAt, `${id} finished long after the kill`).toBeLessThan(HALF_THE_LEASE_MS);
    }
    const done = tally(readLedger(ledger), "done");
    for (const id of ids) expect([0, 1, 2, 3, 4, 5].map((seq) => done.get(`${id} ${seq}`))).toEqual([1, 1, 1, 2, 1, 1]);
  });
});
