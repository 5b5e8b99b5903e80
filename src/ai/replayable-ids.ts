import type { IdGenerator } from "ai";
import type { DurableRun } from "../engine/durable-run.js";
import { hashText } from "../store/value/index.js";

/**
 * Ids the AI SDK makes itself, made the same on replay. The SDK draws some ids outside the model —
 * a tool approval's `approvalId`, a text or reasoning part id it must make unique across steps, the
 * placeholder response id of a streamed step — from `Math.random`, unless `generateText` /
 * `streamText` are given `_internal: { generateId }`. A random id differs on replay: an approval
 * answered with the id the run saw live then matches nothing (`AI_InvalidToolApprovalError`).
 *
 * `ctx.generateId` is a generator for that option. Its ids are derived from the run id, the seq of
 * the model call that last returned in this run (recorded or replayed) and a counter since, so a
 * replay that calls the model and the generator in the same order gets the same ids. Ids the model
 * returns (response ids, part ids, tool call ids) and the response's id and timestamp when the
 * provider omits them are recorded with the call itself (see recorded-model.ts); ids of code the
 * SDK runs without a generator option (none known in generateText/streamText besides `_internal`)
 * cannot be made deterministic.
 */
export function replayableIdGenerator(run: DurableRun, prefix = "aitxt"): IdGenerator {
  return () => {
    const state = stateOf(run);
    const n = state.count++;
    return `${prefix}-${hashText(`${run.runId}:${state.anchor}:${n}`).slice(0, 24)}`;
  };
}

/** A model call at `seq` has just returned to the SDK (live or replayed): ids drawn next hang off it. */
export function modelCallReturned(run: DurableRun, seq: number): void {
  const state = stateOf(run);
  if (state.anchor === seq) return; // a stream announces its call when it starts and again when it is recorded
  state.anchor = seq;
  state.count = 0;
}

interface IdState {
  anchor: number;
  count: number;
}

const states = new WeakMap<DurableRun, IdState>();

function stateOf(run: DurableRun): IdState {
  let state = states.get(run);
  if (state === undefined) {
    state = { anchor: -1, count: 0 };
    states.set(run, state);
  }
  return state;
}
