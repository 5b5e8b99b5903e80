/**
 * A demo executor process: `cairn demo` spawns it, kills it with SIGKILL, and spawns it again.
 * Each one launches a Cairn on the demo database with the support agent registered; its executor
 * claims the tickets' runs (the first one finds them enqueued, the next ones recover them from the
 * dead worker) and it exits once they have all ended. Configured through the environment:
 * CAIRN_DATABASE, CAIRN_DEMO_DIR, CAIRN_DEMO_RUNS (comma-separated run ids), CAIRN_DEMO_WORKER,
 * and the model's CAIRN_DEMO_BASE_URL, CAIRN_DEMO_MODEL, CAIRN_DEMO_API_KEY.
 */
import { wrapLanguageModel } from "ai";
import { Cairn } from "../../index.js";
import { modelFromEnv } from "./demo-model.js";
import { formatMarker, type Marker } from "./markers.js";
import { PaymentService } from "./payment-service.js";
import { DEMO_APP_VERSION, registerSupportAgent } from "./support-agent.js";

const emit = (marker: Marker): void => void process.stdout.write(`${formatMarker(marker)}\n`);

async function counted<T>(request: () => PromiseLike<T>): Promise<T> {
  emit({ event: "model-request" });
  try {
    return await request();
  } catch (error) {
    emit({ event: "model-error", message: error instanceof Error ? error.message : String(error) });
    throw error;
  }
}

async function work(): Promise<void> {
  const { CAIRN_DATABASE: database, CAIRN_DEMO_DIR: directory, CAIRN_DEMO_RUNS: runs, CAIRN_DEMO_WORKER: number } = process.env;
  if (database === undefined || directory === undefined || runs === undefined) {
    throw new Error("the demo worker is started by `cairn demo`, which sets CAIRN_DATABASE, CAIRN_DEMO_DIR and CAIRN_DEMO_RUNS");
  }
  const cairn = new Cairn({
    database,
    appVersion: DEMO_APP_VERSION,
    pollIntervalMs: 50,
    onError: (error) => emit({ event: "error", message: error instanceof Error ? error.message : String(error) }),
  });
  // Counts the requests this worker sends; a call replayed from the journal never gets here.
  const model = wrapLanguageModel({
    model: modelFromEnv(process.env),
    middleware: {
      specificationVersion: "v3",
      wrapGenerate: ({ doGenerate }) => counted(doGenerate),
      wrapStream: ({ doStream }) => counted(doStream),
    },
  });
  const payments = new PaymentService(directory, `worker #${number ?? "?"} (pid ${process.pid})`);
  registerSupportAgent(cairn, { model, payments, emit });
  await cairn.launch();
  const ids = runs.split(",");
  const outcomes = await Promise.allSettled(ids.map((id) => cairn.run(id).result()));
  const failed = outcomes.flatMap((outcome, i) =>
    outcome.status === "rejected" ? [{ runId: ids[i]!, message: outcome.reason instanceof Error ? outcome.reason.message : String(outcome.reason) }] : [],
  );
  emit({ event: "done", failed });
  await cairn.shutdown();
}

work().catch((error: unknown) => {
  emit({ event: "error", message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
