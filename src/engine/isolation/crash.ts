import { IsolatedStepCrashedError, type IsolatedCrashReason } from "../../errors.js";
import { errorFromText } from "../../store/value/index.js";
import { RSS_HEADROOM_MB, type ExitSeen, type IsolatedTask } from "./task.js";

/**
 * Turns how a pool process ended in the middle of a task into the step's error: what happened (the
 * signal or exit code, and what it most likely means), to which run and step, and what to do.
 */
export function crashError(task: IsolatedTask, exit: ExitSeen): IsolatedStepCrashedError {
  const reason = reasonOf(exit);
  const uncaught = exit.uncaught === null ? undefined : errorFromText(exit.uncaught);
  const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.exitCode}`;
  const detail = explain(reason, task, exit, uncaught);
  return new IsolatedStepCrashedError(
    `isolated step "${task.stepName}" (run ${task.runId}, seq ${task.seq}) crashed: its process (pid ${exit.pid}) ${how} — ${detail}. ` +
      "The executor and the other runs are unaffected and the pool has replaced the process; the step is retried if its retries allow, else it fails with this error.",
    { stepName: task.stepName, reason, signal: exit.signal, exitCode: exit.exitCode, pid: exit.pid, stderrTail: exit.stderr },
    { runId: task.runId, seq: task.seq, ...(uncaught === undefined ? {} : { cause: uncaught }) },
  );
}

/** V8's own words when a heap limit is reached (Node 20–24), and the watchdog's (isolated-child.ts). */
const OUT_OF_MEMORY = /heap out of memory|Reached heap limit|Allocation failed|cairn: out of memory/i;

function reasonOf(exit: ExitSeen): IsolatedCrashReason {
  if (OUT_OF_MEMORY.test(exit.stderr)) return "out-of-memory";
  if (exit.uncaught !== null) return "uncaught-exception";
  return exit.signal !== null ? "signal" : "exit";
}

function explain(reason: IsolatedCrashReason, task: IsolatedTask, exit: ExitSeen, uncaught: unknown): string {
  switch (reason) {
    case "out-of-memory":
      return task.maxMemoryMb === undefined
        ? "it ran out of memory (V8's heap limit); give the step a larger maxMemoryMb, or make it hold less at once"
        : `it ran out of memory: its V8 heap passed maxMemoryMb (${task.maxMemoryMb} MB), or its resident size maxMemoryMb + ${RSS_HEADROOM_MB} MB (Buffers, native memory); raise maxMemoryMb, or make the step hold less at once (stream its input instead of loading it whole)`;
    case "uncaught-exception":
      return `an exception was thrown outside the promise the export returned (a callback, a timer, an unawaited promise): ${messageOf(uncaught)}; await that work, or catch inside the callback`;
    case "signal":
      return exit.signal === "SIGSEGV" || exit.signal === "SIGBUS" || exit.signal === "SIGILL" || exit.signal === "SIGFPE"
        ? "a native crash (a native addon, or memory corruption in native code); fix or replace the native code the step calls"
        : exit.signal === "SIGABRT"
          ? "it aborted (process.abort(), or a native assertion failed); see the stderr tail on the error (stderrTail)"
          : "a signal from outside (another process, the OOM killer of the operating system, an operator); find who sent it";
    case "exit":
      return "the step's code ended its process (process.exit) before returning a result; an isolated export must return (or throw) its outcome, never exit";
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
