import { Worker } from "node:worker_threads";
import { decodeValue, encodeValue, errorText } from "../../store/value/index.js";
import { loadExport, type IsolatedTarget } from "./isolated.js";
import type { ChildMessage, RunMessage } from "./protocol.js";

/**
 * The program of one pool process (started by pool.ts with `child_process.fork`). It waits for
 * `run` messages, runs one export at a time, and answers with its outcome through the codec.
 *
 * What it never does is survive something that may have broken it: an exception thrown outside the
 * task's promise is reported (so the step's error can name it) and the process exits; the pool
 * replaces it. Everything else that can kill a process — OOM, a signal, `process.exit` — is seen by
 * the parent from the exit itself.
 */

const send = (message: ChildMessage, then?: () => void): void => {
  if (process.connected) process.send!(message, undefined, undefined, () => then?.());
  else then?.();
};

process.on("uncaughtException", (error) => {
  // Exit even if the report cannot be sent: the process may be in any state now.
  const exit = (): never => process.exit(1);
  setTimeout(exit, 1_000).unref();
  send({ type: "uncaught", error: errorText(error, "an uncaught exception in an isolated process") }, exit);
});

// The parent closed the channel (pool shutdown) or died: nothing can reach this process any more.
process.on("disconnect", () => process.exit(0));

/**
 * A parent killed with SIGKILL closes the channel, but a process stuck in an infinite loop never
 * runs its "disconnect" handler. A watchdog thread (its own event loop, untouched by the main
 * thread's loop) sees the process re-parented and kills it, so no pool process outlives its executor.
 */
const watchdog = new Worker(
  `const { workerData } = require("node:worker_threads");
   setInterval(() => { if (process.ppid !== workerData.ppid) process.kill(workerData.pid, "SIGKILL"); }, 200);`,
  { eval: true, workerData: { ppid: process.ppid, pid: process.pid } },
);
watchdog.unref();

const exports = new Map<string, Promise<(input: unknown, call: { idempotencyKey: string; attempt: number }) => unknown>>();

process.on("message", (message: RunMessage) => {
  if (message.type === "run") void run(message);
});

async function run(task: RunMessage): Promise<void> {
  let reply: ChildMessage;
  try {
    const target: IsolatedTarget = { module: task.module, exportName: task.exportName };
    const key = `${task.module}#${task.exportName}`;
    let fn = exports.get(key);
    if (fn === undefined) {
      fn = loadExport(target);
      exports.set(key, fn);
      fn.catch(() => exports.delete(key));
    }
    const output = await (await fn)(decodeValue(task.input), { idempotencyKey: task.idempotencyKey, attempt: task.attempt });
    reply = { type: "result", id: task.id, ok: true, output: encodeValue(output, `the output of isolated ${task.where}`) };
  } catch (error) {
    reply = { type: "result", id: task.id, ok: false, error: errorText(error, `the error of isolated ${task.where}`) };
  }
  send(reply);
}

send({ type: "ready" });
