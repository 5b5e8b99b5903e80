/**
 * A worker process of `npm run experiment`: runs the workload's tasks on one runtime, printing
 * markers (markers.ts) on stdout, until its tasks are over — or until the supervisor SIGKILLs it.
 * Configured by the supervisor through one environment variable (worker-config.ts).
 */

import { formatMarker } from "../markers.js";
import { readWorkerConfig } from "./worker-config.js";

async function main(): Promise<void> {
  const config = readWorkerConfig(process.env);
  switch (config.runtime) {
    case "conventional":
      return (await import("./conventional-worker.js")).runConventionalWorker(config);
    // LangGraph is a development dependency of Cairn: loaded only by the arm that needs it.
    case "langgraph":
      return (await import("./langgraph-worker.js")).runLangGraphWorker(config);
    case "cairn":
      return (await import("./cairn-worker.js")).runCairnWorker(config);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stdout.write(`${formatMarker({ e: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) })}\n`);
    process.exit(1);
  },
);
