/**
 * Cairn's error taxonomy. Every error has a stable `name` (its class name) and `code`, survives
 * the trip through the journal (a failed run's error is rebuilt with the same class on any
 * process that reads it), and says what happened, to which run and step, and what to do.
 */

export type CairnErrorCode =
  | "CAIRN_ERROR"
  | "TERMINAL"
  | "RETRYABLE"
  | "CANCELLED"
  | "TIMEOUT"
  | "NON_DETERMINISM"
  | "BUDGET_EXCEEDED"
  | "PERMISSION_DENIED"
  | "APPROVAL_DENIED"
  | "INVALID_SPEC"
  | "INVALID_INPUT"
  | "UNSERIALIZABLE"
  | "RUN_NOT_FOUND"
  | "NOT_A_CAIRN_DATABASE"
  | "FENCED"
  | "POISON_RUN"
  | "AI_SDK_UNAVAILABLE"
  | "ISOLATED_STEP_CRASHED"
  | "SUPERVISOR_SHUTDOWN";

export interface CairnErrorOptions {
  cause?: unknown;
  runId?: string;
  seq?: number;
}

/** The base of every error Cairn throws. */
export class CairnError extends Error {
  readonly code: CairnErrorCode = "CAIRN_ERROR";
  readonly runId: string | undefined;
  readonly seq: number | undefined;

  constructor(message: string, options: CairnErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.runId = options.runId;
    this.seq = options.seq;
  }
}

/** Thrown from a step to fail it at once: no further attempts, whatever the retry policy. */
export class TerminalError extends CairnError {
  override readonly code = "TERMINAL";
}

/** Thrown from a step to ask for another attempt even when `shouldRetry` would say no. */
export class RetryableError extends CairnError {
  override readonly code = "RETRYABLE";
}

/** The run (or an ancestor) was cancelled. */
export class CancelledError extends CairnError {
  override readonly code = "CANCELLED";
}

/** A step attempt, a `recv`, an event wait or a run's deadline ran out of time. */
export class TimeoutError extends CairnError {
  override readonly code = "TIMEOUT";
}

/**
 * The workflow code called something other than what its journal recorded at a seq: the code
 * changed under an in-flight run, or it branches on something not recorded (time, randomness,
 * outside reads). Fix: route the nondeterminism through `ctx`, or guard the change with
 * `ctx.patched(name)`, then `cairn resume` the run.
 */
export class NonDeterminismError extends CairnError {
  override readonly code = "NON_DETERMINISM";
}

export class BudgetExceededError extends CairnError {
  override readonly code = "BUDGET_EXCEEDED";
}

export class PermissionDeniedError extends CairnError {
  override readonly code = "PERMISSION_DENIED";
}

export class ApprovalDeniedError extends CairnError {
  override readonly code = "APPROVAL_DENIED";
}

/** An option, spec or argument is invalid; the message names the field and the value. */
export class InvalidSpecError extends CairnError {
  override readonly code = "INVALID_SPEC";
  constructor(
    readonly field: string,
    readonly value: unknown,
    reason: string,
  ) {
    super(`invalid ${field}: ${preview(value)} — ${reason}`);
  }
}

/** A run's input failed its workflow's schema; nothing was stored. */
export class InvalidInputError extends CairnError {
  override readonly code = "INVALID_INPUT";
}

/** A value handed to Cairn to store cannot be stored (a function, a cycle, a class instance). */
export class UnserializableError extends CairnError {
  override readonly code = "UNSERIALIZABLE";
}

export class RunNotFoundError extends CairnError {
  override readonly code = "RUN_NOT_FOUND";
  constructor(runId: string) {
    super(`no run with id "${runId}" — list runs with \`cairn runs\``, { runId });
  }
}

/** The database exists but holds no Cairn schema (or a newer one than this version knows). */
export class NotACairnDatabaseError extends CairnError {
  override readonly code = "NOT_A_CAIRN_DATABASE";
}

/**
 * You should never see this outside Cairn: this executor no longer owns the run (it was
 * cancelled, or its lease passed to another executor), so its writes were refused.
 */
export class FencedError extends CairnError {
  override readonly code = "FENCED";
}

export function preview(value: unknown, max = 80): string {
  let text: string;
  try {
    text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * A run was recovered more than `maxRecoveryAttempts` times without finishing: something in it
 * (a step that crashes its process, runs it out of memory, or hangs it past its lease) kills every
 * executor that loads it. It is parked as failed instead of being recovered forever. Fix the cause,
 * then `cairn resume <run>` (which gives it a fresh allowance).
 */
export class PoisonRunError extends CairnError {
  override readonly code = "POISON_RUN";
}

/**
 * Cairn's AI features (`cairn/ai`, `cairn.agent`, `ctx.model`) need the Vercel AI SDK, a peer
 * dependency: `ai@6` with `@ai-sdk/provider@3`, or `ai@7` with `@ai-sdk/provider@4`. Thrown when it
 * is missing or of another major; the message names what was found and what to install.
 */
export class AiSdkUnavailableError extends CairnError {
  override readonly code = "AI_SDK_UNAVAILABLE";
}

/** How an isolated step's process ended while the step was in it (see IsolatedStepCrashedError). */
export type IsolatedCrashReason = "out-of-memory" | "uncaught-exception" | "signal" | "exit";

export interface IsolatedCrash {
  /** The step (or tool) that was running in the process. */
  stepName: string;
  reason: IsolatedCrashReason;
  /** The signal that ended the process ("SIGSEGV", "SIGABRT", "SIGKILL", ...), or null if it exited. */
  signal: string | null;
  /** The process's exit code, or null if a signal ended it. */
  exitCode: number | null;
  pid: number | null;
  /** The last lines the process wrote to stderr (V8's out-of-memory report, a native crash's message). */
  stderrTail: string;
}

/**
 * The process an isolated step ran in (`{ isolation: "process" }`) died before it answered: an
 * out-of-memory (past `maxMemoryMb`), an exception thrown asynchronously (rebuilt as `cause`), a
 * `process.exit`, or a native crash (SIGSEGV, abort). Only that step fails; the executor and every
 * other run go on, and the pool replaces the process. A step failure like any other: retried while
 * the step's `retries` allow (it is not a TerminalError), then recorded, and replay throws it again.
 */
export class IsolatedStepCrashedError extends CairnError {
  override readonly code = "ISOLATED_STEP_CRASHED";
  readonly stepName: string;
  readonly reason: IsolatedCrashReason;
  readonly signal: string | null;
  readonly exitCode: number | null;
  readonly pid: number | null;
  readonly stderrTail: string;

  constructor(message: string, crash: Partial<IsolatedCrash> = {}, options: CairnErrorOptions = {}) {
    super(message, options);
    this.stepName = crash.stepName ?? "";
    this.reason = crash.reason ?? "exit";
    this.signal = crash.signal ?? null;
    this.exitCode = crash.exitCode ?? null;
    this.pid = crash.pid ?? null;
    this.stderrTail = crash.stderrTail ?? "";
  }
}

/**
 * A supervisor gave up (src/supervision/): its children restarted more often than its restart
 * intensity allows, so it stopped them all and ended with OTP's reason `shutdown`. Its own
 * supervisor handles that exit by its child spec; at the top of a tree the run is failed with it.
 */
export class SupervisorShutdownError extends CairnError {
  override readonly code = "SUPERVISOR_SHUTDOWN";
}
