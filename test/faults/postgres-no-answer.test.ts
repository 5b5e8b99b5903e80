import { afterEach, describe, expect, it } from "vitest";
import pg from "pg";
import { InvalidSpecError } from "../../src/index.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// PostgreSQL only: a connection whose server stops answering (a backend frozen with SIGSTOP here;
// in the field a half-open connection after a NAT or a load balancer forgot it). Freezing a backend
// takes the right to signal the server's processes: root, or the user the server runs as.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");
const maySignalServer = process.getuid?.() === 0;

describe.skipIf(postgres === undefined || !maySignalServer)("a PostgreSQL connection that stops answering", () => {
  const env = cairnFactory(postgres!);
  // Thawed after each test, even one that timed out (its own code is then still waiting).
  const frozen: number[] = [];
  afterEach(() => {
    for (const pid of frozen.splice(0)) process.kill(pid, "SIGCONT");
  });

  it("is dropped after answerTimeoutMs, and the executor's runs go on on new connections", async () => {
    const db = await env.database();
    const name = new URL(db).pathname.slice(1);
    const cairn = env.cairn(db, { answerTimeoutMs: 1_000 });
    const steps = cairn.workflow("steps", async (ctx, n: number) => {
      let sum = 0;
      for (let i = 0; i < 5; i++) sum += await ctx.step(`s${i}`, () => n + i);
      return sum;
    });
    await cairn.launch();
    expect(await (await steps.start(0)).result()).toBe(10);

    const admin = new pg.Client({ connectionString: db });
    await admin.connect();
    try {
      // Every connection the executor has: the group commit's, the pool's, its listening session.
      const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [name]);
      expect(rows.length).toBeGreaterThan(0);
      for (const { pid } of rows) {
        process.kill(pid, "SIGSTOP");
        frozen.push(pid);
      }
      // Before, every commit queued behind the frozen one, for as long as the kernel kept the
      // connection (about fifteen minutes on a real network; forever here), while the heartbeat
      // went on and no peer took the runs over.
      const runs = await Promise.all(Array.from({ length: 10 }, (_, n) => steps.start(n + 1)));
      expect(await Promise.all(runs.map((run) => run.result()))).toEqual(Array.from({ length: 10 }, (_, n) => 5 * (n + 1) + 10));
      // On connections opened since: the frozen ones were dropped by the client.
      const { rows: now } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [name]);
      expect(now.filter((row) => !frozen.includes(row.pid)).length).toBeGreaterThan(0);
    } finally {
      for (const pid of frozen.splice(0)) process.kill(pid, "SIGCONT");
      await admin.end();
    }
  }, 30_000);

  it("refuses an answerTimeoutMs that is not a positive number, naming it", () => {
    for (const bad of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, "30s" as unknown as number]) {
      expect(() => new PostgresStore("postgres://127.0.0.1/x", { answerTimeoutMs: bad })).toThrow(InvalidSpecError);
    }
    expect(() => new PostgresStore("postgres://127.0.0.1/x", { answerTimeoutMs: 0 })).toThrow(/answerTimeoutMs/);
  });
});
