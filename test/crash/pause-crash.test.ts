import { describe, expect, it } from "vitest";
import { BACKENDS, type Backend } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { readLedger, sqliteWriteLockIsFree, tally, workerFactory, type Worker } from "./crash-harness.js";
import { runtimeOf, storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("a worker paused past its lease on $name", (backend) => {
  const env = cairnFactory(backend);
  const workers = workerFactory();

  it("is taken over; once it wakes it commits nothing into the run it lost, and its later claims are not orphans", async () => {
    // Long enough that neither live worker, later, stalls past it on a loaded machine (a slow fsync,
    // the other test worker's load) and is taken for dead: the test waits for it once.
    const leaseMs = 1_500;
    const db = await env.database();
    const ledger = workers.ledger();
    const frozen = workers.spawn({
      database: db,
      ledger,
      leaseMs,
      stay: true,
      start: [{ workflow: "steps", id: "held", input: { n: 4 } }],
      hang: ["slow@held@1"],
    });
    await frozen.line(/^slow held 1$/);
    // SIGSTOP: alive (its pid answers, its PostgreSQL session stays open) but silent, so only the
    // lease can tell the peer it is gone.
    await pauseOutsideAWrite(frozen, backend, db);
    const peer = workers.spawn({ database: db, ledger, leaseMs, stay: true, await: ["held"] });
    expect(await peer.result("held")).toEqual({ status: "succeeded", value: { n: 4, sum: 14 } });

    frozen.resume();
    // Its step finishes the effect it had begun (at least once: same key), then its commit is fenced.
    await frozen.line(/^done held 1$/);
    const observer = env.cairn(db);
    const steps = observer.workflow("steps", async () => undefined);
    const ids = Array.from({ length: 10 }, (_, i) => `after-${i}`);
    for (const id of ids) await steps.start({ n: 5 }, { id });
    for (const id of ids) expect((await runtimeOf(observer).waitForRun(id, { timeoutMs: 15_000 })).status).toBe("succeeded");

    const entries = readLedger(ledger);
    const byHeld = entries.filter((e) => e.kind === "done" && e.runId === "held").map((e) => [e.seq, e.pid === frozen.pid ? "frozen" : "peer", e.key]);
    expect(byHeld).toEqual([
      [0, "frozen", "held:0"],
      [1, "peer", "held:1"],
      [2, "peer", "held:2"],
      [3, "peer", "held:3"],
      [1, "frozen", "held:1"],
    ]);
    // No crash after the pause: each step of the later runs ran once, and no run was taken over.
    const done = tally(entries, "done");
    for (const id of ids)
      expect(
        [0, 1, 2, 3, 4].map((seq) => done.get(`${id} ${seq}`)),
        id,
      ).toEqual([1, 1, 1, 1, 1]);
    const recovered = await storeOf(observer).query("SELECT id, recoveries FROM cairn_runs WHERE id LIKE 'after-%' AND recoveries > 0");
    expect(recovered.rows).toEqual([]);
  });
});

/**
 * Freezes the worker at a moment it holds no SQLite write lock. The worker polls and heartbeats, so
 * a SIGSTOP can land inside one of its short write transactions; a process frozen there holds the
 * database's one write lock, and every other process waits for it (SQLite allows one writer — no
 * lease can take a lock over). That is SQLite's limit, not what this test is about: it is about a
 * worker frozen between commits, so it stops the worker again until the write lock is free.
 * PostgreSQL locks rows, not the database, so one SIGSTOP is the test there.
 */
async function pauseOutsideAWrite(worker: Worker, backend: Backend, database: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    worker.pause();
    if (backend.name !== "sqlite" || sqliteWriteLockIsFree(database)) return;
    worker.resume();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error("the worker held SQLite's write lock at each of 100 pauses");
}
