import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { eventually } from "../harness.js";
import { noScratchCluster, scratchDir, startScratchCluster, type ScratchCluster } from "./fault-harness.js";

// `deferFinishFsync` under a power loss of the database server: a private PostgreSQL cluster is
// stopped with `pg_ctl stop -m immediate` right after a run's result came back, while its finish
// (committed with synchronous_commit = off; the walwriter told to wait 10 s) is still only in the
// server's WAL buffers. The crash and the restart happen synchronously on this thread, so nothing
// of Cairn's runs in between.
//
// The property: a finish the crash erased is replayed, not repeated — the run is running again,
// its executor (re-registered after losing its session) replays it from its journal, whose step
// was durable before the finish, and it ends again with the same value; the step's effect (a line
// in a file, fsynced) happens once. A workflow without the option is the control: its finish
// waited for its flush and survives every crash.

const unavailable = noScratchCluster();
const ROUNDS = 4;

describe.skipIf(unavailable !== undefined)("deferred finishes on PostgreSQL under a power loss (pg_ctl stop -m immediate)", () => {
  let cluster: ScratchCluster | undefined;
  afterAll(() => cluster?.stop());

  it("a finish the crash erased is replayed from the journal: same value, no step run again", async () => {
    cluster = startScratchCluster("-c wal_writer_delay=10s");
    const server = cluster;
    const log = join(scratchDir("deferred-finish"), "effects.log");
    closeSync(openSync(log, "a"));
    const effect = (line: string): void => {
      const fd = openSync(log, "a");
      try {
        writeSync(fd, `${line}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    };
    const body = async (ctx: { runId: string; step: <T>(name: string, fn: () => T) => Promise<T> }, n: number): Promise<number> => {
      const tens = await ctx.step("effect", () => {
        effect(ctx.runId);
        return n * 10;
      });
      return tens + 1;
    };
    const errors: unknown[] = [];
    const cairn = new Cairn({ database: server.url, pollIntervalMs: 20, onError: (error) => errors.push(error) });
    const deferred = cairn.workflow("df-crash", body, { deferFinishFsync: true });
    const control = cairn.workflow("df-control", body);
    const statusAfterCrash = new Map<string, string>();
    const crashAfter = async (id: string, result: Promise<number>, expected: number): Promise<void> => {
      expect(await result).toBe(expected);
      server.crash();
      server.start();
      statusAfterCrash.set(id, server.psql(`SELECT status FROM cairn_runs WHERE id = '${id}'`)[0] ?? "missing");
    };
    try {
      await cairn.launch();
      for (let i = 0; i < ROUNDS; i++) {
        await crashAfter(`deferred-${i}`, (await deferred.start(i, { id: `deferred-${i}` })).result(), i * 10 + 1);
        await crashAfter(`control-${i}`, (await control.start(i, { id: `control-${i}` })).result(), i * 10 + 1);
      }
      // Every run ends succeeded with its first value, the erased ones once replayed.
      for (let i = 0; i < ROUNDS; i++) {
        for (const id of [`deferred-${i}`, `control-${i}`]) {
          const row = await eventually(() => {
            const [line] = server.psql(`SELECT status, output FROM cairn_runs WHERE id = '${id}'`);
            return line?.startsWith("succeeded\t") === true ? line : undefined;
          }, 60_000).catch((error: unknown) => {
            // Say where the run was left: its row, the executors, what Cairn reported.
            const run = server.psql(`SELECT status, executor_id, updated_at FROM cairn_runs WHERE id = '${id}'`);
            const executors = server.psql("SELECT id, backend_pid, heartbeat_at FROM cairn_executors");
            throw new Error(`run ${id} did not end again: ${JSON.stringify({ run, executors, errors: errors.map(String) })}`, { cause: error });
          });
          expect(row).toBe(`succeeded\t${i * 10 + 1}`);
        }
      }
    } finally {
      await cairn.shutdown();
    }
    // The control's finishes waited for their flush: none was erased.
    for (let i = 0; i < ROUNDS; i++) expect(statusAfterCrash.get(`control-${i}`)).toBe("succeeded");
    // The option's finishes did not: the crash erased them (the deferral is real) — at least once,
    // should a flush by anything else have covered some.
    const erased = [...statusAfterCrash].filter(([id, status]) => id.startsWith("deferred-") && status === "running");
    expect(erased.length).toBeGreaterThan(0);
    // No step ran twice: one effect per run.
    const lines = readFileSync(log, "utf8")
      .split("\n")
      .filter((l) => l !== "");
    expect(lines.sort()).toEqual(
      Array.from({ length: ROUNDS }, (_, i) => [`control-${i}`, `deferred-${i}`])
        .flat()
        .sort(),
    );
  }, 180_000);
});
