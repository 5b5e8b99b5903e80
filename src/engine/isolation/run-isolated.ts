import { CairnError, InvalidSpecError } from "../../errors.js";
import { decodeValue, encodeValue, errorFromText } from "../../store/value/index.js";
import type { StepCall, StepOptions } from "../context.js";
import { isolatedStepTarget } from "./isolated.js";
import type { IsolationPool } from "./pool.js";

/**
 * The engine's one hook for isolated steps (called from run/steps.ts): a step whose options say
 * `isolation: "process"` has its function replaced by one that runs the named export in a pool
 * process. Everything else — attempts, retries, the per-attempt timeout, recording, replay — is the
 * step's usual path, so an isolated step is journaled, retried and replayed exactly as any step:
 * its outcome is committed by this (the parent) process, and a recorded one never runs again.
 */
export function isolatedExecute(
  pool: IsolationPool | undefined,
  fn: unknown,
  options: StepOptions,
  where: { runId: string; seq: number; stepName: string },
): (call: StepCall) => Promise<unknown> {
  const target = isolatedStepTarget(fn)!;
  const place = `run ${where.runId} seq ${where.seq} ("${where.stepName}")`;
  return async (call) => {
    if (pool === undefined) throw new CairnError(`${place} asks for isolation "process", but this executor has no isolation pool`);
    // Read first: the attempt's signal exists only if asked for, and a timeout or cancel must reach the process.
    const signal = call.signal;
    const answer = await pool.run(
      {
        module: target.module,
        exportName: target.exportName,
        input: encodeValue(target.input, `the input of isolated ${place}`),
        idempotencyKey: call.idempotencyKey,
        attempt: call.attempt,
        maxMemoryMb: options.maxMemoryMb,
        stepName: where.stepName,
        where: place,
        runId: where.runId,
        seq: where.seq,
      },
      signal,
    );
    if (answer.ok) return decodeValue(answer.output);
    throw errorFromText(answer.error);
  };
}

/** Checks a step's isolation options when it is called live (with its other options, in run/steps.ts). */
export function validateIsolation(options: StepOptions, fn: unknown): void {
  const { isolation, maxMemoryMb } = options;
  if (isolation === undefined) {
    if (maxMemoryMb !== undefined) throw new InvalidSpecError("maxMemoryMb", maxMemoryMb, 'applies only to a step with isolation: "process"');
    return;
  }
  if (isolation !== "process") throw new InvalidSpecError("isolation", isolation, 'the one isolation there is is "process"');
  if (maxMemoryMb !== undefined && (!Number.isInteger(maxMemoryMb) || maxMemoryMb < 16)) {
    throw new InvalidSpecError("maxMemoryMb", maxMemoryMb, "must be a whole number of megabytes ≥ 16 (V8 cannot start below that)");
  }
  if (isolatedStepTarget(fn) === undefined) {
    throw new InvalidSpecError(
      "fn",
      fn,
      'a step with isolation: "process" runs in another process, where a function cannot travel with its closure: ' +
        'name an exported function instead — ctx.step(name, isolated(import.meta.url, "myExport").with(input), { isolation: "process" }) (docs/isolation.md)',
    );
  }
}
