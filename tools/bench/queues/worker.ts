import { measureLatency } from "./drive.js";
import type { ParentMessage, WorkerMessage } from "./protocol.js";
import { now, type BenchInput, type Worker } from "./system.js";
import { systemNamed } from "./systems.js";

/**
 * One executor process of `npm run bench:queues` (forked by main.ts with an IPC channel): starts
 * the system's worker, reports each reported run's start time, and — when producer and executor
 * share this process — runs the measurements itself.
 */
let worker: Worker | undefined;
const waiting = new Map<number, (at: number) => void>();
let local = false;

function send(message: WorkerMessage): void {
  process.send!(message);
}

function onStart(input: BenchInput): void {
  if (!input.report) return;
  const at = now();
  if (local) waiting.get(input.i)?.(at);
  else send({ type: "started", i: input.i, at });
}

process.on("message", (message: ParentMessage) => {
  void handle(message).catch((error: unknown) => {
    console.error("[bench worker]", error);
    process.exit(1);
  });
});

async function handle(message: ParentMessage): Promise<void> {
  switch (message.type) {
    case "start": {
      local = message.local;
      const system = systemNamed(message.system);
      worker = await system.startWorker(message.database, message.index, onStart);
      send({ type: "ready" });
      return;
    }
    case "measure": {
      const system = systemNamed(message.system);
      const producer = await system.openProducer(message.database, worker);
      const started = (i: number) => new Promise<number>((resolve) => waiting.set(i, resolve));
      try {
        send({ type: "latency", latencies: await measureLatency(producer, message.runs, message.firstIndex, started) });
      } finally {
        await producer.close();
      }
      return;
    }
    case "stop":
      await worker?.stop();
      send({ type: "stopped" });
      process.exit(0);
  }
}
