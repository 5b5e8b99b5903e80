import { fork, type ChildProcess } from "node:child_process";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "../scratch-databases.js";
import { bootstrapRatioInterval, formatCount, formatRatio, median, percentile, renderTable } from "../stats.js";
import { completionRate, fill, measureLatency, waitCompleted, type Throughput } from "./drive.js";
import type { ParentMessage, WorkerMessage } from "./protocol.js";
import { now, type SystemName } from "./system.js";
import { systemNamed } from "./systems.js";

/**
 * `npm run bench:queues [-- --quick] [-- --json] [-- --postgres <url>] [-- --rounds <n>]`
 *
 * Queue dispatch side by side on one machine, in one run: Cairn (start() and enqueue() on a declared
 * queue), DBOS Transact queues, pg-boss and
 * graphile-worker with 4 executor processes each on the same local PostgreSQL server (a fresh
 * database per measurement), and Cairn on SQLite with one process (producer and executor together)
 * and with two executor processes fed by a producer process. Two figures per arm:
 *
 * - enqueue-to-start latency (p50, p99): one run at a time into idle executors, from the
 *   producer's enqueue call to the first line of the run's body (a wake-up, not a queueing delay);
 * - dispatch throughput: runs of a 1-step workflow (a job, for the job queues) per second, from
 *   the first enqueue until the database counts every run finished, 16 enqueues in flight.
 *
 * Arms run in rounds whose order flips every round; the report gives medians over rounds and the
 * ratios of Cairn-on-PostgreSQL against each peer. The p99 is also read off every round's samples
 * pooled, with a 95% bootstrap interval for the peer ÷ Cairn ratio: one round's p99 rests on its
 * slowest 1% (a few samples), and on this shared machine two rounds of the same arm differed by
 * more than the arms did — an interval that contains 1.00 says this run cannot tell them apart.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";
const USAGE = `usage: npm run bench:queues -- [--quick] [--json] [--postgres <url>] [--rounds <n>] [--samples <n>] [--only <text,...>]
  --quick           1 round, 40 latency samples, 1000 runs for throughput (default 2 rounds, 150, 3000)
  --json            print the report as JSON
  --postgres <url>  the server to create scratch databases on (default $CAIRN_BENCH_POSTGRES_URL, else ${LOCAL_POSTGRES})
  --rounds <n>      rounds
  --samples <n>     latency samples per arm (default 40 with --quick, else 150)
  --only <text>     only the arms whose label contains this text, or one of these texts separated by commas
                    (a diagnostic: e.g. --only "PostgreSQL (enqueue),graphile" for the goal's ratio)`;

const IN_FLIGHT = 16;
const WARMUP_RUNS = 50;
const THROUGHPUT_TIMEOUT_MS = 180_000;

interface ArmSpec {
  label: string;
  system: SystemName;
  backend: "postgres" | "sqlite";
  executors: number;
  /** The producer shares the (single) executor's process. */
  local: boolean;
}

const ARMS: readonly ArmSpec[] = [
  { label: "Cairn, PostgreSQL (start)", system: "cairn", backend: "postgres", executors: 4, local: false },
  { label: "Cairn, PostgreSQL (enqueue)", system: "cairn-queue", backend: "postgres", executors: 4, local: false },
  { label: "DBOS Transact queues", system: "dbos", backend: "postgres", executors: 4, local: false },
  { label: "pg-boss", system: "pg-boss", backend: "postgres", executors: 4, local: false },
  { label: "graphile-worker", system: "graphile-worker", backend: "postgres", executors: 4, local: false },
  { label: "Cairn, SQLite, 1 process", system: "cairn", backend: "sqlite", executors: 1, local: true },
  { label: "Cairn, SQLite, 2 processes", system: "cairn", backend: "sqlite", executors: 2, local: false },
  { label: "Cairn, SQLite (enqueue), 1 process", system: "cairn-queue", backend: "sqlite", executors: 1, local: true },
];

interface Measurement {
  latencies: number[];
  throughput: Throughput;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      postgres: { type: "string" },
      rounds: { type: "string" },
      samples: { type: "string" },
      only: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const quick = values.quick ?? false;
  const rounds = values.rounds === undefined ? (quick ? 1 : 2) : Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be an integer ≥ 1, got ${values.rounds}`);
  const latencySamples = values.samples === undefined ? (quick ? 40 : 150) : Number(values.samples);
  if (!Number.isInteger(latencySamples) || latencySamples < 1) throw new Error(`--samples must be an integer ≥ 1, got ${values.samples}`);
  const throughputRuns = quick ? 1000 : 3000;
  const postgresUrl = values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES;

  const connected = await ScratchPostgres.connect(postgresUrl);
  if (!("server" in connected)) throw new Error(`PostgreSQL at ${postgresUrl} is unreachable (${connected.unreachable}); every PostgreSQL arm needs it`);
  const server = connected.server;
  const postgresVersion = await server.version();

  const only = values.only?.split(",").map((text) => text.trim());
  const arms = ARMS.filter((arm) => only === undefined || only.some((text) => arm.label.includes(text)));
  const results = new Map<string, Measurement[]>();
  for (let round = 0; round < rounds; round++) {
    for (const arm of round % 2 === 1 ? [...arms].reverse() : arms) {
      progress(`round ${round + 1}/${rounds}: ${arm.label}`);
      const scratch = arm.backend === "postgres" ? await server.fresh() : scratchSqlite();
      try {
        const measured = await measureArm(arm, scratch, latencySamples, throughputRuns);
        results.set(arm.label, [...(results.get(arm.label) ?? []), measured]);
      } finally {
        await scratch.dispose();
      }
    }
  }

  const rows = arms.map((arm) => {
    const ms = results.get(arm.label) ?? [];
    return {
      arm: arm.label,
      executors: arm.executors,
      settings: systemNamed(arm.system).settings,
      latencyP50Ms: median(ms.map((m) => percentile(sorted(m.latencies), 50))),
      latencyP99Ms: median(ms.map((m) => percentile(sorted(m.latencies), 99))),
      // Every round's samples together: a tail read off more samples than one round's.
      latencyP99PooledMs: pooled(ms).length === 0 ? null : percentile(sorted(pooled(ms)), 99),
      runsPerSecond: median(ms.map((m) => m.throughput.runsPerSecond)),
      drainRunsPerSecond: median(ms.map((m) => (m.throughput.runs * 1000) / m.throughput.drainMs)),
      startToDoneRunsPerSecond: median(ms.map((m) => m.throughput.startToDoneRunsPerSecond)),
      enqueuePerSecond: median(ms.map((m) => m.throughput.enqueuePerSecond)),
    };
  });
  // Each Cairn arm on PostgreSQL (start and enqueue) against each peer: the other systems.
  const peers = rows.filter((r) => r.executors === 4 && !r.arm.startsWith("Cairn"));
  const cairns = rows.filter((r) => r.executors === 4 && r.arm.startsWith("Cairn"));
  const ratios = cairns.flatMap((cairn) =>
    peers.map((peer) => ({
      cairn: cairn.arm,
      peer: peer.arm,
      throughput: ratio(cairn.runsPerSecond, peer.runsPerSecond),
      p99: ratio(peer.latencyP99Ms, cairn.latencyP99Ms),
      p99Pooled: ratio(peer.latencyP99PooledMs, cairn.latencyP99PooledMs),
      p99PooledInterval: bootstrapRatioInterval(pooled(results.get(cairn.arm) ?? []), pooled(results.get(peer.arm) ?? []), (s) => percentile(s, 99)),
    })),
  );
  const report = {
    environment: { node: process.version, cpus: cpus().length, postgres: postgresVersion, rounds, latencySamples, throughputRuns, inFlight: IN_FLIGHT },
    rows,
    ratios,
  };
  if (values.json) return console.log(JSON.stringify(report, null, 2));
  console.log(
    `\nbench:queues — ${rounds} round(s); latency: ${latencySamples} runs one at a time into idle executors; throughput: ${throughputRuns} runs queued, then the executors started`,
  );
  console.log(
    `Node ${process.version}, ${cpus().length} CPUs, PostgreSQL ${postgresVersion} on loopback; medians over rounds (pooled p99: all rounds' samples together)\n`,
  );
  console.log(
    renderTable([
      ["arm", "executors", "p50 ms", "p99 ms", "pooled p99 ms", "runs/s", "start→done runs/s", "drain runs/s", "enqueues/s"],
      ...rows.map((r) => [
        r.arm,
        String(r.executors),
        fixed(r.latencyP50Ms),
        fixed(r.latencyP99Ms),
        fixed(r.latencyP99PooledMs),
        formatCount(r.runsPerSecond),
        formatCount(r.startToDoneRunsPerSecond),
        formatCount(r.drainRunsPerSecond),
        formatCount(r.enqueuePerSecond),
      ]),
    ]),
  );
  console.log("\nCairn on PostgreSQL against each peer (same run, same server):\n");
  console.log(
    renderTable([
      ["Cairn arm", "peer", "throughput, Cairn ÷ peer", "p99 latency, peer ÷ Cairn", "pooled p99, peer ÷ Cairn (95% interval)"],
      ...ratios.map((r) => [
        r.cairn,
        r.peer,
        formatRatio(r.throughput),
        formatRatio(r.p99),
        `${formatRatio(r.p99Pooled)} (${r.p99PooledInterval === null ? "—" : `${r.p99PooledInterval.low.toFixed(2)}–${r.p99PooledInterval.high.toFixed(2)}`})`,
      ]),
    ]),
  );
  console.log("\nSettings:");
  for (const r of rows) console.log(`  ${r.arm}: ${r.settings}`);
}

/**
 * One arm on a fresh database. Latency: executors up and idle, after a warm-up. Throughput: the
 * executors are stopped, the producer fills the queue, then fresh executor processes start on it
 * and the start times they report give the dispatch rate.
 */
async function measureArm(arm: ArmSpec, scratch: ScratchDatabase, latencySamples: number, throughputRuns: number): Promise<Measurement> {
  const system = systemNamed(arm.system);
  await system.prepare(scratch.database);
  const producer = await system.openProducer(scratch.database);
  try {
    let latencies: number[];
    let index = 0;
    const idle = await startWorkers(arm, scratch.database, arm.local);
    try {
      await fill(producer, WARMUP_RUNS, index, IN_FLIGHT, false);
      await waitCompleted(producer, WARMUP_RUNS, THROUGHPUT_TIMEOUT_MS);
      index += WARMUP_RUNS;
      if (arm.local) {
        latencies = await idle.workers[0]!.measureLatency({ system: arm.system, database: scratch.database, runs: latencySamples, firstIndex: index });
      } else {
        latencies = await measureLatency(producer, latencySamples, index, idle.started);
      }
      index += latencySamples;
      await waitCompleted(producer, index, THROUGHPUT_TIMEOUT_MS);
    } finally {
      await idle.stop();
    }

    // Each run reports its start (one IPC message), for startToDoneRunsPerSecond.
    const enqueueMs = await fill(producer, throughputRuns, index, IN_FLIGHT, true);
    const before = await producer.completed();
    const busy = await startWorkers(arm, scratch.database, false);
    const begin = now();
    let counts;
    try {
      counts = await waitCompleted(producer, before + throughputRuns, THROUGHPUT_TIMEOUT_MS);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the last start reports, still on their way
    } finally {
      await busy.stop();
    }
    const drainMs = counts.at(-1)!.at - begin;
    return {
      latencies,
      throughput: {
        runs: throughputRuns,
        runsPerSecond: completionRate(counts, before, throughputRuns, begin),
        startToDoneRunsPerSecond: busy.startTimes.length === 0 ? NaN : (throughputRuns * 1000) / (counts.at(-1)!.at - Math.min(...busy.startTimes)),
        drainMs,
        enqueuePerSecond: (throughputRuns * 1000) / enqueueMs,
      },
    };
  } finally {
    await producer.close();
  }
}

interface Executors {
  workers: WorkerProcess[];
  /** Resolves when run `i` reports its start. */
  started(i: number): Promise<number>;
  /** Every start reported, in arrival order. */
  startTimes: number[];
  stop(): Promise<void>;
}

/** The arm's executor processes, all started at once. */
async function startWorkers(arm: ArmSpec, database: string, local: boolean): Promise<Executors> {
  const waiters = new Map<number, (at: number) => void>();
  const startTimes: number[] = [];
  const onStarted = (i: number, at: number): void => {
    startTimes.push(at);
    waiters.get(i)?.(at);
  };
  const workers = await Promise.all(Array.from({ length: arm.executors }, (_, k) => WorkerProcess.start(arm, database, k, local, onStarted)));
  return {
    workers,
    started: (i) => new Promise<number>((resolve) => waiters.set(i, resolve)),
    startTimes,
    stop: async () => {
      await Promise.all(workers.map((worker) => worker.stop()));
    },
  };
}

const WORKER = join(dirname(fileURLToPath(import.meta.url)), "worker.js");

/** An executor process, driven over its IPC channel. */
class WorkerProcess {
  private pending: ((message: WorkerMessage) => void) | null = null;

  private constructor(
    private readonly child: ChildProcess,
    onStarted: (i: number, at: number) => void,
  ) {
    child.on("message", (message: WorkerMessage) => {
      if (message.type === "started") onStarted(message.i, message.at);
      else this.pending?.(message);
    });
  }

  static async start(arm: ArmSpec, database: string, index: number, local: boolean, onStarted: (i: number, at: number) => void): Promise<WorkerProcess> {
    const child = fork(WORKER, [], { stdio: ["ignore", "inherit", "inherit", "ipc"], execArgv: ["--no-deprecation"] });
    const worker = new WorkerProcess(child, onStarted);
    await worker.request({ type: "start", system: arm.system, database, index, local });
    return worker;
  }

  async measureLatency(message: Omit<Extract<ParentMessage, { type: "measure" }>, "type">): Promise<number[]> {
    const reply = await this.request({ type: "measure", ...message });
    if (reply.type !== "latency") throw new Error(`unexpected reply ${reply.type}`);
    return reply.latencies;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.send({ type: "stop" } satisfies ParentMessage);
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }

  private request(message: ParentMessage): Promise<WorkerMessage> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`a bench worker exited (code ${code}) before answering ${message.type}`));
      this.child.once("exit", onExit);
      this.pending = (reply) => {
        this.child.off("exit", onExit);
        this.pending = null;
        resolve(reply);
      };
      this.child.send(message);
    });
  }
}

/** An arm's latency samples from every round. */
function pooled(measurements: readonly Measurement[]): number[] {
  return measurements.flatMap((m) => m.latencies);
}

function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

function ratio(a: number | null, b: number | null): number | null {
  return a === null || b === null || b === 0 ? null : a / b;
}

function fixed(value: number | null): string {
  return value === null ? "—" : value.toFixed(value < 10 ? 2 : 1);
}

function progress(message: string): void {
  process.stderr.write(`bench:queues: ${message}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
