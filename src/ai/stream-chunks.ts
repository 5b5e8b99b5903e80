import type { DurableRun } from "../engine/durable-run.js";
import { decodeValue, encodeValue } from "../store/value/index.js";
import type { Store, WriteOp } from "../store/store.js";

/**
 * Durable streams: every part of streamed model calls as rows in `cairn_stream_chunks`, keyed by
 * (run, model call seq, position), for readers in any process (`readStream`) — text, reasoning,
 * tool input as it is typed, tool calls, provider-executed tool results, sources, files, in-band
 * errors and (when the call asked for them) raw chunks. The results of Cairn's own tool calls are
 * read from `cairn_tool_calls` and the journal and merged in at their seq: they are in the stream
 * once their step has committed, never before.
 *
 * Live parts are written as they arrive, best effort (a reader wants them now) but under the run's
 * fence, so an old owner that lost the run (frozen past its lease, then back) cannot write into a
 * stream its new owner already rebuilt; when the call's checkpoint commits, the same transaction
 * rewrites every part from the record and adds a `finish` row, so what a reader sees after
 * `finish` is exactly the recorded answer, even if a crash cut the first attempt's stream short.
 */
export function appendChunk(run: DurableRun, seq: number, position: number, kind: StreamChunkKind, text: string, part?: Record<string, unknown>): void {
  run.store.commit(run.fence, [chunkOp(run.runId, seq, position, kind, stored(kind, text, part), run.clock.now())]).catch(() => undefined);
}

/**
 * Where this execution's attempt at a call writes: each load of a run after a takeover streams into
 * a higher band, starting with a `reset` row, so a reader that followed a cut-short attempt across
 * the crash knows to drop what it has of that call (the retry's parts may differ).
 */
export function streamBand(run: DurableRun): number {
  return (run.info.recoveries + 1) * BAND;
}

/** A stream part as a reader sees it: its chunk kind, text and fields; null for parts readers do not get. */
export function chunkOf(part: { type: string } & Record<string, unknown>): { kind: StreamChunkKind; text: string; part?: Record<string, unknown> } | null {
  switch (part.type) {
    case "text-delta":
      return { kind: "text", text: String(part.delta) };
    case "reasoning-delta":
      return { kind: "reasoning", text: String(part.delta), part: { id: part.id } };
    case "tool-input-delta":
      return { kind: "tool-input-delta", text: String(part.delta), part: { id: part.id } };
    case "tool-input-start":
    case "tool-input-end":
    case "tool-call":
    case "tool-result":
    case "source":
    case "file":
    case "raw": {
      const { type: _type, ...fields } = part;
      void _type;
      return { kind: part.type, text: "", part: fields };
    }
    case "error": {
      const error = part.error as { name?: unknown; message?: unknown } | null | undefined;
      const described =
        error instanceof Object && typeof error.message === "string"
          ? { name: String(error.name ?? "Error"), message: error.message }
          : { name: "Error", message: String(error) };
      return { kind: "error", text: described.message, part: { error: described } };
    }
    default:
      return null;
  }
}

export function streamChunkOps(run: DurableRun, seq: number, band: number, parts: ({ type: string } & Record<string, unknown>)[]): WriteOp[] {
  const at = run.clock.now();
  // Whatever an earlier, cut-short attempt left is replaced by the record.
  const ops: WriteOp[] = [
    { type: "delete", table: "cairn_stream_chunks", where: { run_id: run.runId, model_seq: seq } },
    chunkOp(run.runId, seq, band, "reset", "", at),
  ];
  let position = band + 1;
  for (const part of parts) {
    const chunk = chunkOf(part);
    if (chunk !== null) ops.push(chunkOp(run.runId, seq, position++, chunk.kind, stored(chunk.kind, chunk.text, chunk.part), at));
  }
  ops.push(chunkOp(run.runId, seq, FINISH_POSITION, "finish", "", at));
  return ops;
}

/** Positions per attempt band (a call streams fewer parts than this). */
const BAND = 1_000_000;

/** The finish row sorts after every part of its call (and fits PostgreSQL's INTEGER). */
const FINISH_POSITION = 2_000_000_000;

/** Text rows keep the bare delta (what readers of earlier versions expect); other kinds, their fields too. */
function stored(kind: StreamChunkKind, text: string, part: Record<string, unknown> | undefined): string {
  if (kind === "text" || kind === "reset" || kind === "finish" || part === undefined) return text;
  try {
    return encodeValue({ text, part }, "a stream part");
  } catch {
    return JSON.stringify({ text, part: { unstorable: true } });
  }
}

function chunkOp(runId: string, seq: number, position: number, kind: StreamChunkKind, chunk: string, at: number): WriteOp {
  return {
    type: "insert",
    table: "cairn_stream_chunks",
    values: { run_id: runId, model_seq: seq, position, kind, chunk, created_at: at },
    onConflict: { keys: ["run_id", "model_seq", "position"], action: "update" },
  };
}

/**
 * "text": a text delta. "reasoning": a reasoning delta. "tool-input-start" / "tool-input-delta" /
 * "tool-input-end": a tool call's input as the model types it. "tool-call": a complete tool call.
 * "tool-result" / "tool-error": a tool's outcome (Cairn's tool calls once their step committed, and
 * provider-executed tools). "source", "file": what the model cited or produced. "error": an in-band
 * error the provider streamed (the call goes on, as in the AI SDK). "raw": a provider's raw chunk,
 * when the call asked for them (`includeRawChunks`). "reset": an attempt at this call begins — drop
 * any parts of this call read so far (a crash cut an earlier attempt short, and the retry may say
 * something else). "finish": the call's parts are complete and are exactly the recorded answer.
 */
export type StreamChunkKind =
  | "text"
  | "reasoning"
  | "tool-input-start"
  | "tool-input-delta"
  | "tool-input-end"
  | "tool-call"
  | "tool-result"
  | "tool-error"
  | "source"
  | "file"
  | "error"
  | "raw"
  | "reset"
  | "finish";

export interface StreamChunk {
  /** Resume after a crash or a disconnect with `{ after: chunk.offset }`. */
  offset: string;
  /** The seq of the model call the chunk belongs to — for a Cairn tool's result, of the tool call. */
  modelSeq: number;
  kind: StreamChunkKind;
  /** The delta (text, reasoning, tool-input-delta), an error's message, else "". */
  text: string;
  /**
   * The part's fields for kinds other than text, reset and finish: ids (`id`, `toolCallId`),
   * `toolName`, `input`, `output` (tool results), `error: { name, message }`, `rawValue`, ...
   */
  part?: Record<string, unknown>;
}

interface ChunkRow {
  seq: number;
  position: number;
  kind: StreamChunkKind;
  chunk: string;
}

/**
 * Reads a run's streamed model output from any process: every chunk after `after` (an offset from
 * an earlier chunk), then new ones as they are written, until the run has finished and everything
 * is read. Chunks come in (seq, position) order: a reader following a run whose calls overlap (calls
 * in concurrent branches) can pass a later call's chunk before an earlier call's last ones are
 * written, and then skips those; read again from the start (or after the run ended) for all of them.
 */
export async function* readStream(
  store: Store,
  runId: string,
  options: { after?: string; pollMs?: number; signal?: AbortSignal } = {},
): AsyncGenerator<StreamChunk> {
  let [seq, position] = (options.after ?? "-1:-1").split(":").map(Number) as [number, number];
  for (;;) {
    if (options.signal?.aborted) return;
    const rows = await newRows(store, runId, seq, position);
    for (const row of rows) {
      seq = Number(row.seq);
      position = Number(row.position);
      yield toChunk(row);
    }
    if (rows.length === 0) {
      const run = await store.getRun(runId);
      if (run === undefined || run.status === "succeeded" || run.status === "failed" || run.status === "cancelled") {
        if ((await newRows(store, runId, seq, position)).length === 0) return;
      }
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 50));
    }
  }
}

/** Stream rows and tool outcomes after (seq, position), merged in order. */
async function newRows(store: Store, runId: string, seq: number, position: number): Promise<ChunkRow[]> {
  const [chunks, tools] = await Promise.all([
    store.select<{ model_seq: number; position: number; kind: StreamChunkKind; chunk: string }>(
      `SELECT model_seq, position, kind, chunk FROM cairn_stream_chunks
       WHERE run_id = $1 AND (model_seq > $2 OR (model_seq = $2 AND position > $3)) ORDER BY model_seq, position`,
      [runId, seq, position],
    ),
    // A tool's outcome sits at its step's seq, position 0.
    store.select<{ seq: number; tool_call_id: string; tool_name: string; status: string; output: string | null; error: string | null }>(
      `SELECT t.seq, t.tool_call_id, t.tool_name, j.status, j.output, j.error FROM cairn_tool_calls t
       JOIN cairn_journal j ON j.run_id = t.run_id AND j.seq = t.seq
       WHERE t.run_id = $1 AND (t.seq > $2 OR (t.seq = $2 AND 0 > $3)) ORDER BY t.seq`,
      [runId, seq, position],
    ),
  ]);
  const rows: ChunkRow[] = chunks.map((c) => ({ seq: Number(c.model_seq), position: Number(c.position), kind: c.kind, chunk: c.chunk }));
  for (const t of tools) {
    const failed = t.status === "failed";
    const fields: Record<string, unknown> = { toolCallId: t.tool_call_id, toolName: t.tool_name };
    if (failed) fields.error = errorSummary(t.error);
    else fields.output = t.output === null ? undefined : safeDecode(t.output);
    rows.push({
      seq: Number(t.seq),
      position: 0,
      kind: failed ? "tool-error" : "tool-result",
      chunk: encodeValue({ text: "", part: fields }, "a tool result"),
    });
  }
  return rows.sort((a, b) => a.seq - b.seq || a.position - b.position);
}

function toChunk(row: ChunkRow): StreamChunk {
  const base = { offset: `${row.seq}:${row.position}`, modelSeq: row.seq, kind: row.kind };
  if (row.kind === "text" || row.kind === "reset" || row.kind === "finish") return { ...base, text: row.chunk };
  const value = safeDecode(row.chunk) as { text?: unknown; part?: Record<string, unknown> } | undefined;
  if (value === null || typeof value !== "object") return { ...base, text: row.chunk };
  return { ...base, text: typeof value.text === "string" ? value.text : "", ...(value.part === undefined ? {} : { part: value.part }) };
}

function errorSummary(text: string | null): { name: string; message: string } {
  try {
    const record = JSON.parse(text ?? "{}") as { name?: unknown; message?: unknown };
    return { name: String(record.name ?? "Error"), message: String(record.message ?? "") };
  } catch {
    return { name: "Error", message: String(text) };
  }
}

function safeDecode(text: string): unknown {
  try {
    return decodeValue(text);
  } catch {
    return text;
  }
}
