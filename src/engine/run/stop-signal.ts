/**
 * The signal that stops a run's execution here, made only when something listens to it.
 *
 * Most executions never read it: a run that replays to a due sleep and finishes, or whose steps do
 * not read `call.signal`, only ever stops. An `AbortController` per execution, its abort event and
 * the error that says why cost ~20 µs a run (the error captures a stack) — a fifth of the CPU of a
 * wake-up of 10,000 runs due at once. So the controller is made on the first read of `signal`, and
 * the reason is built only when a controller exists to carry it: a signal read after the stop comes
 * back already aborted, with the same reason it would have had.
 */
export class StopSignal {
  private controller: AbortController | undefined;
  /** Why the run stopped, once it did (built on demand; the first stop's reason wins, as with abort()). */
  private stoppedBy: (() => unknown) | undefined;

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.stoppedBy !== undefined) this.controller.abort(this.stoppedBy());
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.stoppedBy !== undefined;
  }

  /** Stops the execution; `reason` is called at most once, and only if someone holds the signal. */
  abort(reason: () => unknown): void {
    if (this.stoppedBy !== undefined) return;
    let made: { value: unknown } | undefined;
    this.stoppedBy = () => (made ??= { value: reason() }).value;
    this.controller?.abort(this.stoppedBy());
  }
}
