import { parseArgs } from "node:util";
import { conversation } from "./agent-conversation.js";
import { agentStorage, cairnArm, langGraphArm, type ArmMeasurement } from "./agent-storage.js";
import { median } from "./stats.js";

/**
 * `npm run build:tools && node .tmp/tools/tools/bench/agent-main.js [options]`: the agent
 * conversation of `npm run bench` on its own (the same code and defaults), for measuring and
 * profiling the model-call record path without the step workloads around it.
 *
 *   --turns <n>    turns (default 50); --rounds <n> rounds (default 7)
 *   --cairn-only   Cairn's arm alone, round after round: what `node --cpu-prof` should see (with
 *                  --no-fsync: synchronous=NORMAL)
 *   --no-fsync     Cairn with synchronous=NORMAL against LangGraph as shipped (also NORMAL): equal
 *                  durability without the fsyncs, so the ratio is the CPU each spends per checkpoint
 *                  (on a machine whose disk is busy, fsync time swamps it)
 *   --json         the report as JSON
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      turns: { type: "string", default: "50" },
      rounds: { type: "string", default: "7" },
      json: { type: "boolean", default: false },
      "cairn-only": { type: "boolean", default: false },
      "no-fsync": { type: "boolean", default: false },
    },
  });
  const turnCount = Number(values.turns);
  const rounds = Number(values.rounds);
  const turns = conversation(turnCount, 3);
  if (values["cairn-only"]) {
    for (let round = 0; round < rounds; round++) console.log(line(await cairnArm(turns, values["no-fsync"] ? "NORMAL" : undefined)));
    return;
  }
  if (values["no-fsync"]) {
    await cairnArm(turns.slice(0, 6), "NORMAL");
    await langGraphArm(turns.slice(0, 6), null);
    const cairn: ArmMeasurement[] = [];
    const langgraph: ArmMeasurement[] = [];
    for (let round = 0; round < rounds; round++) {
      const pair = [() => cairnArm(turns, "NORMAL"), () => langGraphArm(turns, null)] as const;
      if (round % 2 === 0) {
        cairn.push(await pair[0]());
        langgraph.push(await pair[1]());
      } else {
        langgraph.push(await pair[1]());
        cairn.push(await pair[0]());
      }
    }
    const c = median(cairn.map((a) => a.checkpointMs)) ?? 0;
    const l = median(langgraph.map((a) => a.checkpointMs)) ?? 0;
    console.log(`no fsync (both synchronous=NORMAL), ${turnCount} turns, medians of ${rounds} rounds:`);
    console.log(
      `  cairn ${c.toFixed(1)} ms over ${cairn[0]!.checkpoints} commits, langgraph ${l.toFixed(1)} ms over ${langgraph[0]!.checkpoints}: ${(l / c).toFixed(2)}×`,
    );
    return;
  }
  const report = await agentStorage({ turns: turnCount, toolEvery: 3, rounds }, (m) => console.error(m));
  if (values.json) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  for (const arm of report.arms) console.log(line(arm));
  console.log(
    `checkpoint time LangGraph ÷ Cairn ${report.checkpointTimeRatio.toFixed(2)}× (GC out of both ${report.checkpointTimeRatioWithoutGc.toFixed(2)}×; ` +
      `LangGraph as shipped ${report.checkpointTimeRatioVsDefault.toFixed(2)}×), bytes ${report.storageRatio.toFixed(1)}×`,
  );
  console.log(`checkpoint time LangGraph ÷ Cairn with deferModelCallFsync ${report.checkpointTimeRatioDeferred.toFixed(2)}×`);
}

function line(arm: ArmMeasurement): string {
  return (
    `${arm.arm.padEnd(18)} ${arm.synchronous.padEnd(6)} checkpoint ${arm.checkpointMs.toFixed(1)} ms (gc ${arm.gcMs.toFixed(1)}), ` +
    `${arm.checkpoints} commits, bytes ${arm.bytes}, run ${arm.runMs.toFixed(0)} ms`
  );
}

await main();
