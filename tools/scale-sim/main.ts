import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ScratchPostgres } from "../bench/scratch-databases.js";
import { renderTable } from "../bench/stats.js";
import type { Costs } from "./costs.js";
import { measureCosts } from "./measure.js";
import { simulate, type SimSettings } from "./sim.js";

/**
 * `npm run scale:sim [-- --quick] [-- --costs <file.json> | --save-costs <file.json>] [-- --json] [-- --steps <n>] [-- --rtt-us <n>]`
 *
 * Measures one partition's costs on the local PostgreSQL (or reads them from --costs), then
 * simulates N executors × M partitions (sim.ts) and prints the predicted throughput.
 * docs/scale.md explains the model and shows its output.
 */
const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";
const EXECUTORS = [1, 2, 4, 8, 16, 32, 64];
const PARTITIONS = [1, 2, 4, 8, 16];

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      costs: { type: "string" },
      "save-costs": { type: "string" },
      postgres: { type: "string" },
      steps: { type: "string", default: "10" },
      "runs-per-executor": { type: "string", default: "64" },
      "rtt-us": { type: "string", default: "0" },
      assignment: { type: "string", default: "all" },
    },
  });
  const quick = values.quick ?? false;
  const costs =
    values.costs === undefined
      ? await measured(values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES, quick)
      : (JSON.parse(readFileSync(values.costs, "utf8")) as Costs);
  if (values["save-costs"] !== undefined) writeFileSync(values["save-costs"], `${JSON.stringify(costs, null, 2)}\n`);
  const assignment = values.assignment === "local" ? "local" : "all";
  const base: Omit<SimSettings, "executors" | "partitions"> = {
    stepsPerRun: positive("--steps", values.steps!),
    runsPerExecutor: positive("--runs-per-executor", values["runs-per-executor"]!),
    extraRttUs: Number(values["rtt-us"]),
    assignment,
    warmupSeconds: quick ? 0.1 : 0.3,
    seconds: quick ? 0.3 : 1,
  };
  const cells = EXECUTORS.map((executors) =>
    PARTITIONS.map((partitions) => ({ executors, partitions, ...simulate(costs, { ...base, executors, partitions }) })),
  );
  if (values.json) return console.log(JSON.stringify({ costs, settings: base, cells: cells.flat() }, null, 2));

  console.log("Measured per-partition costs (one PostgreSQL, this machine):");
  console.log(`  step commit, one run alone:       ${costs.stepLatencyUs.toFixed(0)} µs`);
  console.log(`  partition, many runs (group):     ${Math.round(costs.partitionStepsPerSecond).toLocaleString("en-US")} steps/s`);
  console.log(`  executor CPU per step:            ${costs.executorCpuPerStepUs.toFixed(0)} µs`);
  console.log(`  claim:                            ${costs.claimFixedUs.toFixed(0)} µs + ${costs.claimPerRunUs.toFixed(1)} µs per run claimed`);
  console.log(`  workflow.start() from a client:   ${costs.startLatencyUs.toFixed(0)} µs`);
  console.log(`  (${costs.measuredOn})`);
  console.log(
    `\nPredicted runs/s (${base.stepsPerRun} steps per run, ${base.runsPerExecutor} runs held per executor, extra RTT ${base.extraRttUs} µs, executors claim from ${assignment === "all" ? "every partition" : "their own partition"}); in brackets: executor / partition busy %\n`,
  );
  console.log(
    renderTable([
      ["executors \\ partitions", ...PARTITIONS.map(String)],
      ...cells.map((row) => [
        String(row[0]!.executors),
        ...row.map(
          (c) => `${Math.round(c.runsPerSecond).toLocaleString("en-US")} (${Math.round(c.executorBusy * 100)}/${Math.round(c.partitionBusy * 100)})`,
        ),
      ]),
    ]),
  );
}

async function measured(url: string, quick: boolean): Promise<Costs> {
  const connected = await ScratchPostgres.connect(url);
  if (!("server" in connected))
    throw new Error(`PostgreSQL at ${url} is unreachable (${connected.unreachable}); pass --costs <file> to simulate without measuring`);
  const scratch = await connected.server.fresh();
  try {
    process.stderr.write("scale:sim: measuring one partition's costs on the local PostgreSQL...\n");
    return await measureCosts(scratch.database, quick ? 0.3 : 1);
  } finally {
    await scratch.dispose();
  }
}

function positive(flag: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be an integer ≥ 1, got ${JSON.stringify(text)}`);
  return n;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
