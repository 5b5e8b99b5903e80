import { TimeoutError } from "../errors.js";
import type { Clock } from "./clock.js";
import type { StepCall, StepOptions } from "./context.js";
import { backoffDelayMs, shouldAttemptAgain } from "./retry.js";
import { storableThrown } from "../store/value/index.js";

export type Outcome<T> = { ok: true; value: T; attempts: number } | { ok: false; error: unknown; attempts: number };

/** What the attempt loop needs of the run it works for. */
export interface AttemptHost {
  readonly runId: string;
  readonly clock: Clock;
  /** Aborted when the run stops here (cancelled, lost, deadline): every attempt's signal follows it. */
  readonly stopSignal: AbortSignal;
  stopped(): boolean;
  /** Whether the run is still this executor's to work for (RunLifecycle.ownsRun): checked before a retry. */
  owned?(): boolean | Promise<boolean>;
}

/**
 * Runs a step's function until it succeeds, fails in a way not worth retrying, or runs out of
 * attempts, with backoff between attempts. Nothing here is durable: attempts and backoff live in
 * memory, and a crash starts the count again at 1.
 *
 * The failure it returns is what the journal can keep (see `storableThrown`): a thrown value it
 * cannot store becomes the `UnserializableError` that replay would rebuild, so live and replay agree.
 */
export async function runAttempts<T>(
  host: AttemptHost,
  name: string,
  seq: number,
  fn: (call: StepCall & { seq: number }) => Promise<T> | T,
  options: StepOptions,
  idempotencyKey = `${host.runId}:${seq}`,
): Promise<Outcome<T>> {
  for (let attempt = 1; ; attempt++) {
    const attemptSignal = new AttemptSignal(host);
    const call = new AttemptCall(idempotencyKey, attempt, seq, attemptSignal);
    try {
      const value = await withTimeout(host, fn(call), options.timeoutMs, attemptSignal, name, seq, attempt);
      return { ok: true, value, attempts: attempt };
    } catch (error) {
      const failed = (thrown: unknown) => ({
        ok: false as const,
        error: storableThrown(thrown, `run ${host.runId} seq ${seq} ("${name}")`),
        attempts: attempt,
      });
      let again: boolean;
      try {
        again = !host.stopped() && shouldAttemptAgain(error, attempt, options);
      } catch (predicateError) {
        // A `shouldRetry` that throws ends the step with what it threw: recorded like any failure,
        // so the journal has no gap for a replay or a fork to run again.
        return failed(predicateError);
      }
      if (!again) return failed(error);
      try {
        await host.clock.sleep(backoffDelayMs(attempt, options.backoff), host.stopSignal);
      } catch {
        return failed(error);
      }
      // A pause during the backoff may have cost the run: the next attempt starts only if it is ours.
      const owned = host.owned?.() ?? true;
      if (owned !== true && !(await owned)) return new Promise<never>(() => undefined);
    } finally {
      attemptSignal.release();
    }
  }
}

async function withTimeout<T>(
  host: AttemptHost,
  work: Promise<T> | T,
  timeoutMs: number | undefined,
  attemptSignal: AttemptSignal,
  name: string,
  seq: number,
  attempt: number,
): Promise<T> {
  if (timeoutMs === undefined) return work;
  const timer = new AbortController();
  const timeout = host.clock.sleep(timeoutMs, timer.signal).then(() => {
    const error = new TimeoutError(`step "${name}" (run ${host.runId}, seq ${seq}) attempt ${attempt} timed out after ${timeoutMs} ms`, {
      runId: host.runId,
      seq,
    });
    attemptSignal.abort(error);
    throw error;
  });
  try {
    return await Promise.race([Promise.resolve(work), timeout]);
  } finally {
    timer.abort();
    timeout.catch(() => undefined);
  }
}

/**
 * What an attempt's function is given (StepCall, and the seq). `signal` stays an own, enumerable
 * property — spread or listed as the object literal it replaces had it — read through one shared
 * getter: a literal with a getter of its own is made in dictionary mode, ~0.4 µs and ~600 bytes
 * per attempt against ~0.1 µs for this (runAttempts of a trivial step: ~1.0 → ~0.37 µs).
 */
class AttemptCall implements StepCall {
  declare readonly signal: AbortSignal;
  readonly #attemptSignal: AttemptSignal;

  constructor(
    readonly idempotencyKey: string,
    readonly attempt: number,
    readonly seq: number,
    attemptSignal: AttemptSignal,
  ) {
    this.#attemptSignal = attemptSignal;
    Object.defineProperty(this, "signal", SIGNAL);
  }

  static signalOf(this: AttemptCall): AbortSignal {
    return this.#attemptSignal.signal;
  }
}

const SIGNAL: PropertyDescriptor = { get: AttemptCall.signalOf, enumerable: true, configurable: true };

/**
 * One attempt's abort signal, made only if the step reads `call.signal`: AbortSignal.any costs
 * ~10 µs per call on Node 20 (and leaves a weak dependant on the run's signal for the GC), more
 * than all the rest of a step's engine work. Aborted when the run stops or the attempt times out.
 *
 * The attempt follows the run's signal through `followers`, not a listener of its own: adding and
 * removing an EventTarget listener per attempt cost more than the rest of a model call's signal
 * handling (every model call reads its signal, to pass it to the provider).
 */
class AttemptSignal {
  private controller: AbortController | null = null;
  private following: Set<AttemptSignal> | null = null;
  private timedOut: { reason: unknown } | null = null;

  /** The run's host: its stop signal is read only with this attempt's (it is made on first read). */
  constructor(private readonly host: AttemptHost) {}

  get signal(): AbortSignal {
    if (this.controller === null) {
      const controller = new AbortController();
      this.controller = controller;
      const stop = this.host.stopSignal;
      if (this.timedOut !== null) controller.abort(this.timedOut.reason);
      else if (stop.aborted) controller.abort(stop.reason);
      else {
        this.following = followersOf(stop);
        this.following.add(this);
      }
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    this.timedOut ??= { reason };
    this.controller?.abort(reason);
  }

  /** The run stopped during the attempt. */
  stopped(reason: unknown): void {
    this.following = null;
    this.controller?.abort(reason);
  }

  /** The attempt is over: stop following the run's signal. */
  release(): void {
    this.following?.delete(this);
    this.following = null;
  }
}

/**
 * The attempts in progress whose signal was read, per run stop signal, and the one listener on
 * that signal that aborts them: attempts come and go as Set entries, the listener stays.
 */
const followers = new WeakMap<AbortSignal, Set<AttemptSignal>>();

function followersOf(stop: AbortSignal): Set<AttemptSignal> {
  let attempts = followers.get(stop);
  if (attempts === undefined) {
    const following = new Set<AttemptSignal>();
    attempts = following;
    followers.set(stop, following);
    stop.addEventListener(
      "abort",
      () => {
        // A copy: aborting one attempt runs its listeners, which may end it (release) meanwhile.
        const stopping = [...following];
        following.clear();
        for (const attempt of stopping) attempt.stopped(stop.reason);
      },
      { once: true },
    );
  }
  return attempts;
}
