import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { agentStorage } from "./agent-storage.js";
import { cairnConcurrent, cairnPayloadDedup, cairnSequential, type CairnTiming } from "./cairn-runs.js";
import { rawPostgresSequential, rawSqliteSequential } from "./raw-floors.js";
import {
  agentStorageGoals,
  goalsOf,
  renderReport,
  type Backend,
  type BackendReport,
  type BenchReport,
  type BenchSettings,
  type OverheadReport,
  type WorkloadReport,
} from "./report.js";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "./scratch-databases.js";
import { median, medianSummary, summarize, type Timing } from "./stats.js";

/**
 * `npm run bench [-- --quick] [-- --json] [-- --postgres <url>] [-- --rounds <n>]`
 *
 * Measures Cairn's durable steps against the floor its database sets (one committed row per
 * transaction), on SQLite and, when a server answers, PostgreSQL. Machines are shared and noisy,
 * so each workload runs in several rounds, interleaved (the order of workloads and backends flips
 * every round), and the report gives medians; a Cairn rate is compared with the raw floor of the
 * same round. An agent conversation's checkpoints are then measured against LangGraph.js's
 * snapshot-per-step checkpointer on SQLite (see agent-storage.ts).
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";

const USAGE = `usage: npm run bench -- [--quick] [--json] [--postgres <url>] [--rounds <n>]
  --quick           a short run (3 rounds of 500 sequential steps instead of 7 of 1000,
                    and a 20-turn agent conversation instead of 50)
  --json            print the report as JSON instead of a table
  --postgres <url>  the server to create scratch databases on
                    (default $CAIRN_BENCH_POSTGRES_URL, else ${LOCAL_POSTGRES})
  --rounds <n>      rounds per workload (default 7, quick 3)`;

interface Options {
  settings: BenchSettings;
  json: boolean;
  postgresUrl: string;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      postgres: { type: "string" },
      rounds: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const rounds = values.rounds === undefined ? (quick ? 3 : 7) : Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be an integer ≥ 1, got ${JSON.stringify(values.rounds)}`);
  return {
    settings: {
      quick,
      rounds,
      // Short loops, many rounds: a raw floor and the Cairn run paired with it stay seconds apart.
      sequentialSteps: quick ? 500 : 1000,
      concurrentRuns: 100,
      stepsPerRun: 20,
      payloadSteps: 100,
      payloadValueBytes: 50 * 1024,
      agentTurns: quick ? 20 : 50,
    },
    json: values.json ?? false,
    postgresUrl: values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES,
  };
}

/** One backend's workloads, each taking a fresh database. */
interface BackendPlan {
  backend: Backend;
  /** `durable: false`: a database whose commits skip the fsync (see raw-floors.ts). */
  fresh(durable: boolean): Promise<ScratchDatabase>;
  rawSequential(database: string, rows: number, durable: boolean): Promise<Timing>;
}

interface Samples {
  raw: Timing[];
  sequential: CairnTiming[];
  concurrent: CairnTiming[];
  rawNoFsync: Timing[];
  sequentialNoFsync: CairnTiming[];
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const s = options.settings;
  const plans: BackendPlan[] = [
    { backend: "sqlite", fresh: async () => scratchSqlite(), rawSequential: async (db, n, durable) => rawSqliteSequential(db, n, durable) },
  ];

  let postgresSkipped: string | null = null;
  let postgresVersion: string | null = null;
  const postgres = await ScratchPostgres.connect(options.postgresUrl);
  if ("server" in postgres) {
    postgresVersion = await postgres.server.version();
    // The database's synchronous_commit decides durability; the raw loop and Cairn both inherit it.
    plans.push({ backend: "postgres", fresh: (durable) => postgres.server.fresh(durable), rawSequential: (db, n) => rawPostgresSequential(db, n) });
  } else {
    postgresSkipped = `${redacted(options.postgresUrl)} is unreachable (${postgres.unreachable})`;
    progress(`PostgreSQL rows skipped: ${postgresSkipped}`);
  }

  const samples = new Map<Backend, Samples>(
    plans.map((p) => [p.backend, { raw: [], sequential: [], concurrent: [], rawNoFsync: [], sequentialNoFsync: [] }]),
  );
  for (const plan of plans) {
    progress(`${plan.backend}: warming up`);
    await inFresh(plan, true, (db) => plan.rawSequential(db, 200, true));
    await inFresh(plan, true, (db) => cairnSequential(db, 200));
    await inFresh(plan, true, (db) => cairnConcurrent(db, 20, 5));
  }
  for (let round = 0; round < s.rounds; round++) {
    const flip = round % 2 === 1;
    for (const plan of flip ? [...plans].reverse() : plans) {
      progress(`round ${round + 1}/${s.rounds}: ${plan.backend}`);
      const taken = samples.get(plan.backend)!;
      const n = s.sequentialSteps;
      // A Cairn workload and the raw floor it is compared with run next to each other.
      const workloads = [
        async () => taken.raw.push(await inFresh(plan, true, (db) => plan.rawSequential(db, n, true))),
        async () => taken.sequential.push(await inFresh(plan, true, (db) => cairnSequential(db, n))),
        async () => taken.concurrent.push(await inFresh(plan, true, (db) => cairnConcurrent(db, s.concurrentRuns, s.stepsPerRun))),
        async () => taken.rawNoFsync.push(await inFresh(plan, false, (db) => plan.rawSequential(db, n, false))),
        async () => taken.sequentialNoFsync.push(await inFresh(plan, false, (db) => cairnSequential(db, n, false))),
      ];
      for (const workload of flip ? workloads.reverse() : workloads) await workload();
    }
  }

  const backends: BackendReport[] = [];
  for (const plan of plans) {
    progress(`${plan.backend}: payload dedup`);
    const taken = samples.get(plan.backend)!;
    backends.push({
      backend: plan.backend,
      rawFloor: workload(taken.raw, null),
      sequential: workload(taken.sequential, taken.raw),
      concurrent: workload(taken.concurrent, taken.raw),
      withoutFsync: overhead(taken.rawNoFsync, taken.sequentialNoFsync),
      payload: await inFresh(plan, true, (db) => cairnPayloadDedup(db, s.payloadSteps, s.payloadValueBytes)),
    });
  }

  const agent = await agentStorage({ turns: s.agentTurns, toolEvery: 3, rounds: s.rounds }, progress);

  const report: BenchReport = {
    settings: s,
    environment: { node: process.version, platform: `${process.platform} ${process.arch}`, cpus: cpus().length, postgres: postgresVersion },
    backends,
    postgresSkipped,
    agentStorage: agent,
    goals: [...backends.flatMap(goalsOf), ...agentStorageGoals(agent)],
  };
  console.log(options.json ? JSON.stringify(report, null, 2) : renderReport(report));
}

/** Medians over rounds; against the raw floor, round by round (the same minute's disk). */
function workload(rounds: (Timing | CairnTiming)[], floors: Timing[] | null): WorkloadReport {
  const summaries = rounds.map(summarize);
  const floorRates = floors?.map((f) => summarize(f).operationsPerSecond) ?? null;
  return {
    ...medianSummary(summaries),
    endToEndPerSecond: median(rounds.map((r) => ("endToEndMs" in r ? (r.operations * 1000) / r.endToEndMs : null))),
    vsRawFloor: floorRates === null ? null : median(summaries.map((summary, i) => summary.operationsPerSecond / floorRates[i]!)),
    roundRates: summaries.map((summary) => Math.round(summary.operationsPerSecond)),
  };
}

/** The engine's cost per step beyond the database's, with the fsync out of both. */
function overhead(raw: Timing[], cairn: Timing[]): OverheadReport {
  const usPer = (t: Timing): number => (t.elapsedMs * 1000) / t.operations;
  return {
    rawUsPerRow: median(raw.map(usPer)),
    cairnUsPerStep: median(cairn.map(usPer)),
    overheadUs: median(cairn.map((t, i) => usPer(t) - usPer(raw[i]!))),
  };
}

async function inFresh<T>(plan: BackendPlan, durable: boolean, measure: (database: string) => Promise<T>): Promise<T> {
  const scratch = await plan.fresh(durable);
  try {
    return await measure(scratch.database);
  } finally {
    await scratch.dispose();
  }
}

/** Progress goes to stderr, so `--json` output on stdout stays parseable. */
function progress(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "the PostgreSQL URL";
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
