import { existsSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "../scratch-databases.js";
import { cairnArm } from "./cairn-arm.js";
import { dbosArm } from "./dbos-arm.js";
import { langGraphArm } from "./langgraph-arm.js";
import { rawArm } from "./raw-arm.js";
import { buildReport, renderReport, Samples, type PeersSettings } from "./report.js";
import { STEPS_PER_RUN, type Arm, type Mode } from "./workload.js";

/**
 * `npm run bench:peers [-- --quick] [-- --json] [-- --postgres <url>] [-- --rounds <n>] [-- --runs <n>]`
 *
 * Cairn against its peers on one workflow (10 sequential durable steps per run), in one process on
 * one machine: Cairn on SQLite and PostgreSQL, DBOS Transact on the same PostgreSQL server,
 * LangGraph.js with its SQLite checkpointer, and the raw one-row-per-commit loops as the floor.
 * Each arm takes a fresh database for every measurement, warms up first, and runs its runs one
 * after another and then `inFlight` at a time. The machine is shared and noisy, so the arms are
 * measured side by side in rounds whose order flips every round, and the report gives medians and
 * ratios taken within a round.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";

const USAGE = `usage: npm run bench:peers -- [--quick] [--json] [--postgres <url>] [--rounds <n>] [--runs <n>]
  --quick           one round instead of three
  --json            print the report as JSON instead of a table
  --postgres <url>  the server to create scratch databases on
                    (default $CAIRN_BENCH_POSTGRES_URL, else ${LOCAL_POSTGRES})
  --rounds <n>      rounds (default 3, quick 1)
  --runs <n>        runs per measurement (default 200)`;

const IN_FLIGHT = 16;
const PEER_PACKAGES = ["@dbos-inc/dbos-sdk", "@langchain/langgraph", "@langchain/langgraph-checkpoint-sqlite"];

interface Options {
  settings: PeersSettings;
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
      runs: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const rounds = positiveInteger("--rounds", values.rounds, quick ? 1 : 3);
  const runs = positiveInteger("--runs", values.runs, 200);
  return {
    settings: { quick, rounds, runs, stepsPerRun: STEPS_PER_RUN, inFlight: IN_FLIGHT, warmupRuns: Math.min(runs, 2 * IN_FLIGHT) },
    json: values.json ?? false,
    postgresUrl: values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES,
  };
}

function positiveInteger(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be an integer ≥ 1, got ${JSON.stringify(text)}`);
  return n;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const s = options.settings;
  const freshSqlite = async (): Promise<ScratchDatabase> => scratchSqlite();
  const arms: Arm[] = [rawArm("sqlite", freshSqlite), cairnArm("sqlite", freshSqlite), langGraphArm(true, freshSqlite), langGraphArm(false, freshSqlite)];

  let postgresSkipped: string | null = null;
  let postgresVersion: string | null = null;
  const postgres = await ScratchPostgres.connect(options.postgresUrl);
  if ("server" in postgres) {
    postgresVersion = await postgres.server.version();
    const freshPostgres = (): Promise<ScratchDatabase> => postgres.server.fresh();
    arms.push(rawArm("postgres", freshPostgres), cairnArm("postgres", freshPostgres), dbosArm(freshPostgres));
  } else {
    postgresSkipped = `${redacted(options.postgresUrl)} is unreachable (${postgres.unreachable})`;
    progress(`PostgreSQL arms skipped: ${postgresSkipped}`);
  }

  // Sequential measurements of every arm, then concurrent ones: an arm and the arm it is compared
  // with run within seconds of each other.
  const plan: { arm: Arm; mode: Mode }[] = (["sequential", "concurrent"] as const).flatMap((mode) =>
    arms.filter((arm) => arm.modes.includes(mode)).map((arm) => ({ arm, mode })),
  );
  for (const { arm, mode } of plan) {
    progress(`warm-up: ${arm.name}, ${mode}`);
    await arm.measure(s.warmupRuns, mode === "sequential" ? 1 : s.inFlight);
  }
  const samples = new Samples();
  for (let round = 0; round < s.rounds; round++) {
    for (const { arm, mode } of round % 2 === 1 ? [...plan].reverse() : plan) {
      progress(`round ${round + 1}/${s.rounds}: ${arm.name}, ${mode}`);
      samples.add(arm.name, mode, await arm.measure(s.runs, mode === "sequential" ? 1 : s.inFlight));
    }
  }

  const environment = {
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpus: cpus().length,
    postgres: postgresVersion,
    packages: Object.fromEntries(PEER_PACKAGES.map((name) => [name, packageVersion(name)])),
  };
  const report = buildReport(arms, samples, s, environment, postgresSkipped);
  console.log(options.json ? JSON.stringify(report, null, 2) : renderReport(report));
}

/** The installed version of a package, from the package.json above its entry point. */
function packageVersion(name: string): string {
  let dir = dirname(fileURLToPath(import.meta.resolve(name)));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      const parsed = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string };
      if (parsed.name === name) return parsed.version ?? "unknown";
    }
    const parent = dirname(dir);
    if (parent === dir) return "unknown";
    dir = parent;
  }
}

/** Progress goes to stderr, so `--json` output on stdout stays parseable. */
function progress(message: string): void {
  process.stderr.write(`bench:peers: ${message}\n`);
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
