import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import type { DurableRun } from "../engine/durable-run.js";
import type { Store, WriteOp } from "../store/store.js";

/**
 * Durable streams: the text of streamed model calls as rows in `cairn_stream_chunks`, keyed by
 * (run, model call seq, position), for readers in any process (`readStream`).
 *
 * Live deltas are written as they arrive, best effort (a reader wants them now) but under the run's
 * fence, so an old owner that lost the run (frozen past its lease, then back) cannot write into a
 * stream its new owner already rebuilt; when the call's checkpoint commits, the same transaction
 * rewrites every delta from the record and adds a `finish` row, so what a reader sees after
 * `finish` is exactly the recorded answer, even if a crash cut the first attempt's stream short.
 */
export function appendChunk(run: DurableRun, seq: number, position: number, kind: "text" | "reset", text: string): void {
  run.store.commit(run.fence, [chunkOp(run.runId, seq, position, kind, text, run.clock.now())]).catch(() => undefined);
}

/**
 * Where this execution's attempt at a call writes: each load of a run after a takeover streams into
 * a higher band, starting with a `reset` row, so a reader that followed a cut-short attempt across
 * the crash knows to drop what it has of that call (the retry's text may differ).
 */
export function streamBand(run: DurableRun): number {
  return (run.info.recoveries + 1) * BAND;
}

export function streamChunkOps(run: DurableRun, seq: number, band: number, parts: LanguageModelV3StreamPart[]): WriteOp[] {
  const at = run.clock.now();
  // Whatever an earlier, cut-short attempt left is replaced by the record.
  const ops: WriteOp[] = [
    { type: "delete", table: "cairn_stream_chunks", where: { run_id: run.runId, model_seq: seq } },
    chunkOp(run.runId, seq, band, "reset", "", at),
  ];
  let position = band + 1;
  for (const part of parts) {
    if (part.type === "text-delta") ops.push(chunkOp(run.runId, seq, position++, "text", part.delta, at));
  }
  ops.push(chunkOp(run.runId, seq, FINISH_POSITION, "finish", "", at));
  return ops;
}

/** Positions per attempt band (a call streams fewer deltas than this). */
const BAND = 1_000_000;

/** The finish row sorts after every delta of its call (and fits PostgreSQL's INTEGER). */
const FINISH_POSITION = 2_000_000_000;

function chunkOp(runId: string, seq: number, position: number, kind: StreamChunk["kind"], chunk: string, at: number): WriteOp {
  return {
    type: "insert",
    table: "cairn_stream_chunks",
    values: { run_id: runId, model_seq: seq, position, kind, chunk, created_at: at },
    onConflict: { keys: ["run_id", "model_seq", "position"], action: "update" },
  };
}

export interface StreamChunk {
  /** Resume after a crash or a disconnect with `{ after: chunk.offset }`. */
  offset: string;
  modelSeq: number;
  /**
   * "text": a delta. "reset": an attempt at this call begins — drop any text of this call read so
   * far (a crash cut an earlier attempt short, and the retry may say something else). "finish": the
   * call's text is complete and is exactly the recorded answer.
   */
  kind: "text" | "reset" | "finish";
  text: string;
}

/**
 * Reads a run's streamed model output from any process: every chunk after `after` (an offset from
 * an earlier chunk), then new ones as they are written, until the run has finished and everything
 * is read.
 */
export async function* readStream(
  store: Store,
  runId: string,
  options: { after?: string; pollMs?: number; signal?: AbortSignal } = {},
): AsyncGenerator<StreamChunk> {
  let [seq, position] = (options.after ?? "-1:-1").split(":").map(Number) as [number, number];
  for (;;) {
    if (options.signal?.aborted) return;
    const rows = await store.select<{ model_seq: number; position: number; kind: StreamChunk["kind"]; chunk: string }>(
      `SELECT model_seq, position, kind, chunk FROM cairn_stream_chunks
       WHERE run_id = $1 AND (model_seq > $2 OR (model_seq = $2 AND position > $3)) ORDER BY model_seq, position`,
      [runId, seq, position],
    );
    for (const row of rows) {
      seq = Number(row.model_seq);
      position = Number(row.position);
      yield { offset: `${seq}:${position}`, modelSeq: seq, kind: row.kind, text: row.chunk };
    }
    if (rows.length === 0) {
      const run = await store.getRun(runId);
      if (run === undefined || run.status === "succeeded" || run.status === "failed" || run.status === "cancelled") {
        const tail = await store.select<{ n: number }>(
          `SELECT count(*) AS n FROM cairn_stream_chunks WHERE run_id = $1 AND (model_seq > $2 OR (model_seq = $2 AND position > $3))`,
          [runId, seq, position],
        );
        if (Number(tail[0]?.n ?? 0) === 0) return;
      }
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 50));
    }
  }
}
