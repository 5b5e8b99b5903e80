import { parseArgs } from "node:util";
import { conversation } from "./agent-conversation.js";
import { agentStorage, cairnArm } from "./agent-storage.js";

/**
 * `node .tmp/tools/tools/bench/agent-main.js [--turns 50] [--rounds 7] [--cairn-only] [--json]`: the agent-conversation
 * part of `npm run bench` on its own (the same code, the same defaults), for profiling the
 * model-call record path (`node --cpu-prof`) without the step workloads around it.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      turns: { type: "string", default: "50" },
      rounds: { type: "string", default: "7" },
      json: { type: "boolean", default: false },
      "cairn-only": { type: "boolean", default: false },
    },
  });
  if (values["cairn-only"]) {
    // Cairn's arm alone, round after round: what `node --cpu-prof` should see.
    const turns = conversation(Number(values.turns), 3);
    for (let round = 0; round < Number(values.rounds); round++) {
      const arm = await cairnArm(turns);
      console.log(
        `cairn checkpoint ${arm.checkpointMs.toFixed(1)} ms (gc ${arm.gcMs.toFixed(1)}), ${arm.checkpoints} commits, bytes ${arm.bytes}, run ${arm.runMs.toFixed(0)} ms`,
      );
    }
    return;
  }
  const report = await agentStorage({ turns: Number(values.turns), toolEvery: 3, rounds: Number(values.rounds) }, (m) => console.error(m));
  if (values.json) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  for (const arm of report.arms) {
    console.log(
      `${arm.arm.padEnd(18)} checkpoint ${arm.checkpointMs.toFixed(1)} ms (gc ${arm.gcMs.toFixed(1)}), ${arm.checkpoints} commits, bytes ${arm.bytes}, run ${arm.runMs.toFixed(0)} ms`,
    );
  }
  console.log(
    `time ratio ${report.checkpointTimeRatio.toFixed(2)}× (without gc ${report.checkpointTimeRatioWithoutGc.toFixed(2)}×, vs shipped ${report.checkpointTimeRatioVsDefault.toFixed(2)}×), bytes ratio ${report.storageRatio.toFixed(1)}×`,
  );
}

await main();
