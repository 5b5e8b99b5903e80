import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import { Worker } from "../crash/crash-harness.js";

const WORKER = fileURLToPath(new URL("./fixtures/select-worker.mjs", import.meta.url));

export interface SelectWorkerOptions {
  database: string;
  start?: { workflow: "chooser" | "sup"; id: string }[];
  await?: string[];
  /** "ready@<select name>" or "recorded@<select name>" (see the fixture). */
  hang?: string;
  stay?: boolean;
}

/** Starts select-worker processes (built package) and SIGKILLs any still alive after each test. */
export function selectWorkers() {
  const alive: Worker[] = [];
  afterEach(async () => {
    await Promise.all(alive.splice(0).map((w) => w.kill()));
  });
  return (options: SelectWorkerOptions): Worker => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DB: options.database,
      START: JSON.stringify(options.start ?? []),
      AWAIT: JSON.stringify(options.await ?? []),
    };
    if (options.hang !== undefined) env.HANG = options.hang;
    if (options.stay === true) env.STAY = "1";
    const worker = new Worker(spawn(process.execPath, [WORKER], { env, stdio: ["ignore", "pipe", "pipe"] }));
    alive.push(worker);
    return worker;
  };
}
