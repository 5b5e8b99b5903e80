/**
 * A demo executor process: `cairn demo` spawns it, kills it with SIGKILL, and spawns it again.
 * Each one launches a Cairn on the demo database and starts the order run under a fixed id: the
 * first creates the run; the next ones find it and recover it (a start with an existing id starts
 * nothing new). Configured through the environment: CAIRN_DATABASE, CAIRN_DEMO_DIR, CAIRN_DEMO_RUN,
 * CAIRN_DEMO_WORKER.
 */
import { Cairn } from "../../index.js";
import { DemoLedger } from "./ledger.js";
import { formatMarker, type Marker } from "./markers.js";
import { DEMO_ORDER, registerOrderWorkflow } from "./order-workflow.js";

const emit = (marker: Marker): void => void process.stdout.write(`${formatMarker(marker)}\n`);

async function work(): Promise<void> {
  const { CAIRN_DATABASE: database, CAIRN_DEMO_DIR: directory, CAIRN_DEMO_RUN: runId, CAIRN_DEMO_WORKER: number } = process.env;
  if (database === undefined || directory === undefined || runId === undefined) {
    throw new Error("the demo worker is started by `cairn demo`, which sets CAIRN_DATABASE, CAIRN_DEMO_DIR and CAIRN_DEMO_RUN");
  }
  const cairn = new Cairn({
    database,
    appVersion: "cairn-demo",
    pollIntervalMs: 50,
    onError: (error) => emit({ event: "error", message: error instanceof Error ? error.message : String(error) }),
  });
  const order = registerOrderWorkflow(cairn, { ledger: new DemoLedger(directory), worker: `worker #${number ?? "?"} (pid ${process.pid})`, emit });
  await cairn.launch();
  const run = await order.start({ ...DEMO_ORDER }, { id: runId });
  const output = await run.result();
  emit({ event: "done", output });
  await cairn.shutdown();
}

work().catch((error: unknown) => {
  emit({ event: "error", message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
