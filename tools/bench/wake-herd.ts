import { fork, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { Cairn } from "../../src/index.js";
import { scratchSqlite, ScratchPostgres } from "./scratch-databases.js";
import { percentile } from "./stats.js";

/**
 * `npm run build:tools && node .tmp/tools/tools/bench/wake-herd.js [--executors 8] [--runs 1000] [--start | --send | --sleep] [--postgres <url> | --sqlite]`
 *
 * What a dispatch costs the fleet that does not get the run (PostgreSQL). `executors` processes
 * serve one queue (FIFO: one of them gets every run); a producer enqueues `runs` runs one at a
 * time, 5 ms apart, then waits until all have finished. Reported: the CPU every executor process
 * used over that window (user + system, from /proc, per run), and the producer's enqueue call
 * (p50, p99). A dispatch that wakes every executor costs each of them a wake-up, a parse and a
 * look per run; one that wakes only the executor it chose costs the others nothing. `--start`:
 * the producer calls `start()` instead (the implicit default queue: every executor may claim the
 * run; one is woken to, and passes the wake-up on to all when it cannot). `--send`: 50 runs wait
 * for messages, and the producer sends `runs` messages to them in turn, one at a time (each
 * message wakes its run, which takes a step and waits again; the executor that parked it holds
 * it warm). `--sleep`: 50 runs sleep (250 ms, `runs` wake-ups in all); reported with how many of
 * the wake-ups replayed the run (the others continued warm on the executor that parked it) and how
 * late they ran. Also reported: the wake-ups
 * sent on `cairn_wake` (heard by every executor) and, when the server runs on this machine, the CPU
 * of every `postgres` process per run — PostgreSQL 15 signals every listening session of the
 * database at each NOTIFY, whatever its channel. Compare two builds by running each (the figures
 * are of one machine, so alternate them). `--sqlite` (with `--sleep` only): the executors share
 * one SQLite file instead (no wake-ups on `cairn_wake`, no server CPU).
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";
const QUEUE = "herd";
const PACE_MS = 5;

/** The runs `--send` keeps waiting for messages, each message sent to the next of them in turn; and the runs `--sleep` keeps sleeping. */
const INBOX_RUNS = 50;
/** `--sleep`: each run's sleep (its 50 runs started 5 ms apart: a wake-up every 5 ms or so, spread). */
const SLEEP_MS = 250;

/** How many times this process entered the `sleeper` or `inbox` workflow's body: their runs' first entries, plus one per replay. */
let bodyEntries = 0;

function declare(cairn: Cairn) {
  cairn.queue(QUEUE, { workerConcurrency: 16 });
  // `--send`: a run that receives `n` messages, a step after each, waiting (parked) in between.
  const inbox = cairn.workflow("inbox", async (ctx, n: number) => {
    bodyEntries++;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const value = (await ctx.recv<number>("n")) ?? 0;
      sum = await ctx.step("add", () => sum + value);
    }
    return sum;
  });
  const herd = cairn.workflow("herd", async (ctx, n: number) => ctx.step("double", () => n * 2));
  // `--sleep`: a run that sleeps `n` times, recording when each wake-up ran (how late it was).
  const sleeper = cairn.workflow("sleeper", async (ctx, n: number) => {
    bodyEntries++;
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      times.push(await ctx.step("t", () => Date.now()));
      await ctx.sleep("nap", SLEEP_MS);
    }
    return times;
  });
  return { herd, inbox, sleeper };
}

type Mode = "enqueue" | "start" | "send" | "sleep";

/** An executor process: serves the queue until told to stop. */
async function executor(database: string): Promise<void> {
  const cairn = new Cairn({ database });
  declare(cairn);
  await cairn.launch();
  process.send!("up");
  process.once(
    "message",
    () =>
      void cairn.shutdown().then(() => {
        process.send!({ bodyEntries }, () => process.exit(0));
      }),
  );
}

/** CPU time (ms) the processes have used so far, user + system (Linux /proc, 10 ms ticks). */
function cpuMs(children: ChildProcess[]): number {
  return children.reduce((sum, child) => {
    const fields = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return sum + (Number(fields[11]) + Number(fields[12])) * 10;
  }, 0);
}

/** CPU time (ms) every `postgres` process on this machine has used so far; processes that ended meanwhile are not counted. */
function serverCpuMs(): number {
  let sum = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (!stat.includes("(postgres)")) continue;
      const fields = stat.split(") ")[1]!.split(" ");
      sum += (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      // it ended between the listing and the read
    }
  }
  return sum;
}

async function measure(database: string, executors: number, runs: number, mode: Mode): Promise<void> {
  const setup = new Cairn({ database });
  declare(setup);
  await setup.query("SELECT 1"); // migrated before the executors race to do it
  const self = fileURLToPath(import.meta.url);
  const children: ChildProcess[] = [];
  const onPostgres = database.startsWith("postgres");
  const reader = new pg.Client({ connectionString: onPostgres ? database : undefined });
  if (onPostgres) await reader.connect();
  // The wake-ups every executor hears (a targeted one passed on, a queue's wake-up), counted while measuring.
  let shared = 0;
  reader.on("notification", () => shared++);
  if (onPostgres) await reader.query("LISTEN cairn_wake");
  const producer = new Cairn({ database });
  const { herd: workflow, inbox, sleeper } = declare(producer);
  /** Whether the executors were told to stop (`--sleep` does, to count their replays). */
  let stopped = false;
  /**
   * `--sleep`: 50 runs, started 5 ms apart, each sleeping `wakeUps / 50` times (SLEEP_MS each);
   * measured from the first start to the last run's end, executors stopped to count the replays.
   */
  const sleepers = async (wakeUps: number): Promise<void> => {
    const naps = Math.ceil(wakeUps / INBOX_RUNS);
    const before = cpuMs(children);
    const serverBefore = serverCpuMs();
    shared = 0;
    const handles = [];
    for (let i = 0; i < INBOX_RUNS; i++) {
      handles.push(await sleeper.start(naps, { id: `sleeper-${i}` }));
      await new Promise((resolve) => setTimeout(resolve, PACE_MS));
    }
    const times = await Promise.all(handles.map((h) => h.result()));
    const used = cpuMs(children) - before;
    const server = serverCpuMs() - serverBefore;
    const heardByAll = shared;
    stopped = true;
    for (const child of children) child.send("stop");
    const entered = (await Promise.all(entries)).reduce((a, b) => a + b, 0);
    const total = INBOX_RUNS * naps;
    const late = times.flatMap((t) => t.slice(1).map((at, k) => at - t[k]! - SLEEP_MS)).sort((a, b) => a - b);
    const replays = entered - INBOX_RUNS;
    console.log(
      `${executors} executors, ${total} wake-ups of ${INBOX_RUNS} sleeping runs (${SLEEP_MS} ms naps): ` +
        `the executors' CPU ${Math.round((used * 1000) / total)} µs a wake-up (all ${executors} processes); ` +
        `${replays} replays (${((100 * (total - replays)) / total).toFixed(1)}% warm); ` +
        `lateness p50 ${percentile(late, 50).toFixed(1)} ms, p90 ${percentile(late, 90).toFixed(1)} ms, p99 ${percentile(late, 99).toFixed(1)} ms, max ${late.at(-1)!.toFixed(1)} ms; ` +
        `${heardByAll} wake-ups on cairn_wake` +
        (server > 0 ? `; local postgres processes' CPU ${Math.round((server * 1000) / total)} µs a wake-up` : ""),
    );
  };
  // What each executor reports as it stops: its entries into the sleeper's and inbox's bodies.
  const entries: Promise<number>[] = [];
  try {
    for (let k = 0; k < executors; k++) {
      const child = fork(self, ["--child", database]);
      children.push(child);
      await new Promise((resolve) => child.once("message", resolve));
      entries.push(new Promise((resolve) => child.on("message", (m: { bodyEntries?: number }) => m.bodyEntries !== undefined && resolve(m.bodyEntries))));
    }
    if (mode === "sleep") {
      await sleepers(runs);
      return;
    }
    const finished = async (n: number) => {
      for (;;) {
        const { rows } = await reader.query<{ n: number }>("SELECT count(*)::int AS n FROM cairn_runs WHERE status = 'succeeded'");
        if (rows[0]!.n >= n) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    // `--send`: every message consumed and every run parked again (or done).
    const settled = async () => {
      for (;;) {
        const { rows } = await reader.query<{ n: number }>(
          `SELECT (SELECT count(*) FROM cairn_messages WHERE consumed_at IS NULL)
             + (SELECT count(*) FROM cairn_runs WHERE status IN ('enqueued', 'running'))::int AS n`,
        );
        if (Number(rows[0]!.n) === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    let sent = 0;
    const enqueueAll = async (prefix: string, count: number): Promise<number[]> => {
      const calls: number[] = [];
      for (let i = 0; i < count; i++) {
        const begin = performance.now();
        if (mode === "start") await workflow.start(i, { id: `${prefix}-${i}` });
        else if (mode === "enqueue") await workflow.enqueue(QUEUE, i, { id: `${prefix}-${i}` });
        else await producer.send(`inbox-${sent++ % INBOX_RUNS}`, "n", i);
        calls.push(performance.now() - begin);
        await new Promise((resolve) => setTimeout(resolve, PACE_MS));
      }
      return calls;
    };
    const done = (n: number) => (mode === "send" ? settled() : finished(n));
    if (mode === "send") {
      for (let i = 0; i < INBOX_RUNS; i++) await inbox.start(Math.ceil((100 + runs) / INBOX_RUNS) + 1, { id: `inbox-${i}` });
      await settled();
    }
    await enqueueAll("warm", 100);
    await done(100);
    const before = cpuMs(children);
    const serverBefore = serverCpuMs();
    shared = 0;
    const calls = (await enqueueAll("run", runs)).sort((a, b) => a - b);
    await done(100 + runs);
    const used = cpuMs(children) - before;
    const server = serverCpuMs() - serverBefore;
    const heardByAll = shared;
    // `--send`: how many of the 100 + `runs` wake-ups replayed their run (the others continued warm).
    let replays = "";
    if (mode === "send") {
      stopped = true;
      for (const child of children) child.send("stop");
      const entered = (await Promise.all(entries)).reduce((a, b) => a + b, 0);
      replays = `; ${entered - INBOX_RUNS} of ${100 + runs} wake-ups replayed their run`;
    }
    console.log(
      `${executors} executors, ${runs} ${mode === "send" ? `messages sent to ${INBOX_RUNS} waiting runs` : `runs ${mode === "start" ? "started" : "enqueued"}`} one at a time: ` +
        `the executors' CPU ${Math.round((used * 1000) / runs)} µs a ${mode === "send" ? "message" : "run"} (all ${executors} processes); ` +
        `${mode} call p50 ${percentile(calls, 50).toFixed(2)} ms, p99 ${percentile(calls, 99).toFixed(2)} ms; ` +
        `${heardByAll} wake-ups on cairn_wake (heard by every executor)` +
        (server > 0 ? `; local postgres processes' CPU ${Math.round((server * 1000) / runs)} µs a ${mode === "send" ? "message" : "run"}` : "") +
        replays,
    );
  } finally {
    if (!stopped) for (const child of children) child.send("stop");
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode === null ? child.once("exit", resolve) : resolve(null)))));
    await producer.shutdown();
    await setup.shutdown();
    if (onPostgres) await reader.end();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      executors: { type: "string" },
      runs: { type: "string" },
      start: { type: "boolean", default: false },
      send: { type: "boolean", default: false },
      sleep: { type: "boolean", default: false },
      postgres: { type: "string" },
      sqlite: { type: "boolean", default: false },
      child: { type: "string" },
    },
  });
  if (values.child !== undefined) return executor(values.child);
  const executors = Number(values.executors ?? 8);
  const runs = Number(values.runs ?? 1000);
  if (!Number.isInteger(executors) || executors < 1) throw new Error(`--executors must be an integer ≥ 1, got ${values.executors}`);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be an integer ≥ 1, got ${values.runs}`);
  const modes = (["start", "send", "sleep"] as const).filter((m) => values[m] === true);
  if (modes.length > 1) throw new Error(`--${modes.join(", --")} measure different wake-ups: give one`);
  const mode = modes[0] ?? "enqueue";
  if (values.sqlite) {
    if (mode !== "sleep") throw new Error("--sqlite measures --sleep only");
    const scratch = scratchSqlite();
    try {
      return await measure(scratch.database, executors, runs, mode);
    } finally {
      await scratch.dispose();
    }
  }
  const url = values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES;
  const connected = await ScratchPostgres.connect(url);
  if (!("server" in connected)) throw new Error(`PostgreSQL at ${url} is unreachable (${connected.unreachable})`);
  const scratch = await connected.server.fresh();
  try {
    await measure(scratch.database, executors, runs, mode);
  } finally {
    await scratch.dispose();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
