import { RetryableError, TerminalError } from "../errors.js";
import type { BackoffOptions, StepOptions } from "./context.js";

/** Whether attempt `attempt` (1-based) failing with `error` earns another one. */
export function shouldAttemptAgain(error: unknown, attempt: number, options: StepOptions): boolean {
  if (attempt > (options.retries ?? 0)) return false;
  if (error instanceof TerminalError) return false;
  if (error instanceof RetryableError) return true;
  return options.shouldRetry === undefined ? true : options.shouldRetry(error);
}

/**
 * Exponential backoff with jitter: the delay before attempt `attempt + 1` is drawn uniformly from
 * [d/2, d], d = min(maxDelayMs, initialDelayMs * factor^(attempt-1)), so retries from many runs
 * that failed together spread out instead of hitting the service in lockstep.
 */
export function backoffDelayMs(attempt: number, backoff: BackoffOptions = {}, random: () => number = Math.random): number {
  const initial = backoff.initialDelayMs ?? 100;
  const factor = backoff.factor ?? 2;
  const max = backoff.maxDelayMs ?? 30_000;
  const d = Math.min(max, initial * factor ** (attempt - 1));
  return d / 2 + random() * (d / 2);
}
