import { parseArgs } from "node:util";
import { Cairn } from "../../src/index.js";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "./scratch-databases.js";
import { median, renderTable } from "./stats.js";

/**
 * `npm run bench:finish [-- --runs 400] [-- --rounds 6] [-- --postgres <url>]`
 *
 * What `deferFinishFsync` (WorkflowOptions) saves: short runs — one step, then the return — from
 * `start()` to `result()`, one at a time and 16 in flight, with the option and without, on a fresh
 * database per measurement. The arms alternate round by round (the machine is shared and noisy) and
 * the report gives each one's median milliseconds per run and the ratio default ÷ deferred. A run
 * here makes three commits: its claim, its step, its finish; the option takes the finish's fsync
 * (SQLite) or WAL flush (PostgreSQL) off the run's path.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";
const USAGE = `usage: npm run bench:finish -- [--runs <n>] [--rounds <n>] [--postgres <url>] [--sqlite-only]
  --runs <n>        runs per measurement (default 400)
  --rounds <n>      rounds, each measuring both arms (default 6)
  --postgres <url>  the server to create scratch databases on (default $CAIRN_BENCH_POSTGRES_URL, else ${LOCAL_POSTGRES})
  --sqlite-only     leave PostgreSQL out`;

const IN_FLIGHT = [1, 16] as const;

/** Milliseconds per run, from the first start to the last result. */
async function measure(database: string, deferFinishFsync: boolean, runs: number, inFlight: number): Promise<number> {
  const errors: unknown[] = [];
  const cairn = new Cairn({ database, onError: (error) => errors.push(error) });
  const wf = cairn.workflow("bench-finish", async (ctx, i: number) => (await ctx.step("one", () => i)) + 1, { deferFinishFsync });
  try {
    await cairn.launch();
    for (let i = 0; i < 20; i++) await (await wf.start(-i - 1)).result(); // warm-up
    let next = 0;
    const begin = performance.now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < runs) {
          const i = next++;
          if ((await (await wf.start(i)).result()) !== i + 1) throw new Error(`run ${i} returned the wrong value`);
        }
      }),
    );
    const ms = (performance.now() - begin) / runs;
    if (errors.length > 0) throw new Error(`Cairn reported ${errors.length} background error(s)`, { cause: errors[0] });
    return ms;
  } finally {
    await cairn.shutdown();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      runs: { type: "string", default: "400" },
      rounds: { type: "string", default: "6" },
      postgres: { type: "string" },
      "sqlite-only": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const runs = Number(values.runs);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(rounds) || rounds < 1) throw new Error(USAGE);
  const backends: { name: string; fresh: () => Promise<ScratchDatabase> }[] = [{ name: "sqlite", fresh: async () => scratchSqlite() }];
  if (!values["sqlite-only"]) {
    const url = values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES;
    const connected = await ScratchPostgres.connect(url);
    if ("server" in connected) backends.push({ name: "postgres", fresh: () => connected.server.fresh() });
    else console.error(`PostgreSQL left out: ${connected.unreachable}`);
  }
  const rows: string[][] = [["backend", "in flight", "default ms/run", "deferFinishFsync ms/run", "default ÷ deferred"]];
  for (const backend of backends) {
    for (const inFlight of IN_FLIGHT) {
      const taken: Record<"default" | "deferred", number[]> = { default: [], deferred: [] };
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? (["default", "deferred"] as const) : (["deferred", "default"] as const);
        for (const arm of order) {
          const scratch = await backend.fresh();
          try {
            taken[arm].push(await measure(scratch.database, arm === "deferred", runs, inFlight));
          } finally {
            await scratch.dispose();
          }
        }
        console.error(`${backend.name}, ${inFlight} in flight: round ${round + 1}/${rounds}`);
      }
      const plain = median(taken.default) ?? NaN;
      const deferred = median(taken.deferred) ?? NaN;
      rows.push([backend.name, String(inFlight), plain.toFixed(3), deferred.toFixed(3), `${(plain / deferred).toFixed(2)}×`]);
    }
  }
  console.log(`\nShort runs (one step, then the return), start() to result(); ${runs} runs, medians of ${rounds} alternated rounds\n`);
  console.log(renderTable(rows));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
