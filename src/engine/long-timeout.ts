/**
 * `setTimeout` for delays of any length. Node keeps a timer's delay in a signed 32-bit field: a
 * delay over 2^31−1 ms (about 24.8 days) is replaced by 1 ms, with a `TimeoutOverflowWarning` —
 * so a 30-day deadline would fire at once, and a waiting run whose wake-up is a month away would
 * be re-armed and fire again in a tight loop. This waits in chunks of at most 2^31−1 ms instead.
 */

export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export interface LongTimeout {
  clear(): void;
}

/**
 * Calls `callback` once after `delayMs` (negative or NaN: as soon as possible; Infinity: never).
 * `unref`: the timer does not keep the process alive, as with `timer.unref()`.
 */
export function setLongTimeout(callback: () => void, delayMs: number, options: { unref?: boolean } = {}): LongTimeout {
  let remaining = Number.isNaN(delayMs) ? 0 : Math.max(0, delayMs);
  let timer: NodeJS.Timeout;
  const arm = (): void => {
    const chunk = Math.min(remaining, MAX_TIMER_DELAY_MS);
    remaining -= chunk;
    timer = setTimeout(remaining > 0 ? arm : callback, chunk);
    if (options.unref === true) timer.unref();
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}

/**
 * Calls `callback` once `now()` reaches `at`, for a wake-up that must not come early: Node's
 * timers may fire a millisecond before their delay has passed by `Date.now()` (libuv measures it
 * on its loop's cached time), and a pass woken then finds the run not yet due — with nothing left
 * to wake it (seen in CI: a warm run's own timer, the only one armed, fired early and the run
 * slept on). Fired early, it waits out the rest once; a clock that moves only when told (a
 * ManualClock, which wakes its listeners itself) gets its callback then anyway.
 */
export function setLongTimeoutAt(callback: () => void, at: number, now: () => number, options: { unref?: boolean } = {}): LongTimeout {
  let timer = setLongTimeout(
    () => {
      const early = at - now();
      if (early <= 0) return callback();
      timer = setLongTimeout(callback, early, options);
    },
    at - now(),
    options,
  );
  return { clear: () => timer.clear() };
}
