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
 * A watchdog thread, with its own event loop, so that it runs while the main thread is stuck in an
 * infinite loop:
 *
 * - A parent killed with SIGKILL closes the channel, but a process looping forever never runs its
 *   "disconnect" handler. The watchdog sees the process re-parented and kills it, so no pool
 *   process outlives its executor.
 * - `--max-old-space-size` bounds V8's heap only; Buffers and native allocations live outside it.
 *   With a memory limit (CAIRN_ISOLATED_RSS_LIMIT_MB, set by the pool from `maxMemoryMb`) the
 *   watchdog also holds the resident size under it, and reports why before it kills (writing to fd
 *   2 directly: a worker's `process.stderr` goes through the main thread, which may be looping).
 */
const rssLimitMb = Number(process.env.CAIRN_ISOLATED_RSS_LIMIT_MB ?? "0");
const watchdog = new Worker(
  `const { workerData } = require("node:worker_threads");
   const { writeSync } = require("node:fs");
   setInterval(() => {
     if (process.ppid !== workerData.ppid) process.kill(workerData.pid, "SIGKILL");
     if (workerData.rssLimitMb > 0) {
       const rssMb = process.memoryUsage.rss() / 1048576;
       if (rssMb > workerData.rssLimitMb) {
         writeSync(2, "cairn: out of memory: resident size " + Math.round(rssMb) + " MB passed the isolated process's limit of " + workerData.rssLimitMb + " MB\\n");
         process.kill(workerData.pid, "SIGKILL");
       }
     }
   }, 50);`,
  { eval: true, workerData: { ppid: process.ppid, pid: process.pid, rssLimitMb } },
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
