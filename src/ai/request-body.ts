import type { DurableRun } from "../engine/durable-run.js";
import { decodeValue } from "../store/value/index.js";
import { redactJson } from "./credentials.js";
import type { PromptView } from "./prompt-memo.js";

/**
 * The request body a provider sent (`result.request.body`, an `APICallError`'s `requestBodyValues`),
 * recorded without storing the conversation again, and rebuilt on replay without reading the
 * database. A body is mostly the prompt in the provider's own format, so storing it whole at every
 * turn would make an N-turn conversation cost O(N²). Here:
 *
 * - every string of the body (at least 64 characters) that is a string of the call's prompt, or the
 *   JSON of one of its values, is stored as a reference into the prompt — `{ "$cairnRef": message
 *   index, "p": path in the message, "j"?: 1 (its JSON) }`. On replay the SDK calls the model with
 *   the same prompt, so the reference is resolved from the call's own arguments;
 * - each large array of the body (the messages, the tools) that extends the same array of one of
 *   the run's recent bodies is stored as that body's seq and the elements added since —
 *   `{ "$cairnArray": [added elements], "after": seq }` — else whole, `{ "$cairnArray": [...] }`.
 *   Replay rebuilds the run's bodies in order, so the base is in memory; only a base older than the
 *   recent ones kept (a long gap between two calls of one loop among many) is read from the journal.
 *
 * So a turn adds to storage the shape of its new messages, not their content, and `request.body`
 * comes back exactly as the provider reported it, minus credentials (credentials.ts). An object of
 * the body that owns a key starting with `$cairn` is wrapped as `{ "$cairnEscaped": object }`; a
 * string body that is JSON is parsed first and marked `{ "$cairnJson": form }`.
 *
 * Why no database read on replay: the engine hands recorded outcomes over one per turn of the event
 * loop and lets the workflow's microtasks settle in between; a branch that waited on I/O after its
 * hand-over could let another branch go first, and concurrent branches would interleave otherwise
 * than live.
 */
export type BodyForm = unknown;

/** Arrays shorter than this (as JSON) stay inline. */
const ADDRESS_ABOVE = 512;

/** Strings shorter than this stay in the body as they are. */
const REFERENCE_FROM = 64;

/** Bodies kept per run as bases for deltas: enough for that many loops running side by side. */
const RECENT_BODIES = 16;

interface BodyIndex {
  /**
   * Per stored array: each element as recorded (JSON, references in) and as rebuilt. A live body's
   * elements are copied only when a later body's decoding reads them (which replay, rebuilding
   * recorded bodies only, does not do for bodies encoded live): copying the whole conversation at
   * every call made a provider's body cost O(N) per call.
   */
  arrays: Map<string, ArrayIndex>;
}

interface ArrayIndex {
  texts: string[];
  readonly values: unknown[];
}

/** An array's index whose values are JSON copies of `source`'s elements, made on first read. */
function lazyIndex(texts: string[], source: unknown[]): ArrayIndex {
  let values: unknown[] | undefined;
  return {
    texts,
    get values() {
      return (values ??= source.map((item) => JSON.parse(JSON.stringify(item ?? null)) as unknown));
    },
  };
}

/** The run's recent bodies by seq, oldest first. */
const recentBodies = new WeakMap<DurableRun, Map<number, BodyIndex>>();

export interface EncodedBody {
  form: BodyForm;
  /** Makes this body a base for the next ones' deltas (call once its record is committed). */
  remember(): void;
}

/** `view`: what the run's prompt memo knows of `prompt` (prompt-memo.ts), to index only its new messages. */
export function encodeBody(run: DurableRun, seq: number, body: unknown, prompt: readonly unknown[] | undefined, view?: PromptView): EncodedBody {
  const recent = recentBodies.get(run);
  const references = prompt === undefined ? new Map<string, PromptRef>() : promptStringsOf(run, prompt, view);
  const arrays: BodyIndex["arrays"] = new Map();
  // Arrays inside an array's elements stay inline: a delta names its array by path, and the
  // elements of one array share theirs.
  const walk = (value: unknown, path: string, nested: boolean): unknown => {
    if (typeof value === "string" && value.length >= REFERENCE_FROM) return references.get(value) ?? value;
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) {
      const walked = value.map((item, i) => walk(item, `${path}[${i}]`, true));
      if (nested) return walked;
      const texts = walked.map((item) => JSON.stringify(item ?? null));
      if (texts.reduce((n, t) => n + t.length, 0) < ADDRESS_ABOVE) return walked;
      arrays.set(path, lazyIndex(texts, value.slice()));
      const base = longestBase(recent, path, texts);
      return base === undefined ? { $cairnArray: walked } : { $cairnArray: walked.slice(base.length), after: base.seq };
    }
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = walk(item, `${path}.${key}`, nested);
    return Object.keys(out).some((key) => key.startsWith("$cairn")) ? { $cairnEscaped: out } : out;
  };
  const clean = redactJson(typeof body === "string" ? (parsedJson(body) ?? body) : body);
  const form = typeof body === "string" && typeof clean !== "string" ? { $cairnJson: walk(clean, "", false) } : walk(clean, "", false);
  return { form, remember: () => keep(run, seq, { arrays }) };
}

/**
 * Rebuilds a recorded body made from `prompt`. No I/O unless a delta's base is not among the run's
 * recent bodies; then `lookUp` reads that call's recorded form (and its prompt is not needed: a
 * base's elements are rebuilt from its own record, references resolved against `prompt` only for
 * this body's own elements). `seq` -1: a body that is no base for later ones (a failed call's).
 */
export async function decodeBody(
  run: DurableRun,
  seq: number,
  form: BodyForm,
  prompt: readonly unknown[] | undefined,
  lookUp: (seq: number) => Promise<{ form: BodyForm; prompt: readonly unknown[] | undefined } | undefined>,
): Promise<unknown> {
  const arrays: BodyIndex["arrays"] = new Map();
  const resolve = (value: unknown): unknown => {
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map(resolve);
    const node = value as Record<string, unknown>;
    if (typeof node.$cairnRef === "number" && Array.isArray(node.p)) {
      let target: unknown = prompt?.[node.$cairnRef];
      for (const step of node.p as (string | number)[]) target = (target as Record<string | number, unknown> | undefined)?.[step];
      return node.j === 1 ? JSON.stringify(target) : target;
    }
    const inner = "$cairnEscaped" in node ? (node.$cairnEscaped as Record<string, unknown>) : node;
    return Object.fromEntries(Object.entries(inner).map(([key, item]) => [key, resolve(item)]));
  };
  const base = async (after: number, path: string): Promise<{ texts: string[]; values: unknown[] }> => {
    let known = recentBodies.get(run)?.get(after);
    if (known === undefined) {
      const earlier = await lookUp(after);
      if (earlier !== undefined) await decodeBody(run, after, earlier.form, earlier.prompt, lookUp);
      known = recentBodies.get(run)?.get(after);
    }
    return known?.arrays.get(path) ?? { texts: [], values: [] };
  };
  const walk = async (value: unknown, path: string): Promise<unknown> => {
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return Promise.all(value.map((item, i) => walk(item, `${path}[${i}]`)));
    const node = value as Record<string, unknown>;
    if (typeof node.$cairnRef === "number") return resolve(node);
    if (Array.isArray(node.$cairnArray)) {
      const added = node.$cairnArray as unknown[];
      const prefix = typeof node.after === "number" ? await base(node.after, path) : { texts: [], values: [] };
      const texts = [...prefix.texts, ...added.map((item) => JSON.stringify(item ?? null))];
      const values = [...prefix.values, ...added.map(resolve)];
      arrays.set(path, { texts, values });
      return values.map((v) => structuredClone(v));
    }
    const inner = "$cairnEscaped" in node ? (node.$cairnEscaped as Record<string, unknown>) : node;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(inner)) out[key] = await walk(item, `${path}.${key}`);
    return out;
  };
  const isJson = form !== null && typeof form === "object" && "$cairnJson" in form;
  const tree = await walk(isJson ? (form as { $cairnJson: unknown }).$cairnJson : form, "");
  if (seq >= 0) keep(run, seq, { arrays });
  return isJson ? JSON.stringify(tree) : tree;
}

/**
 * The body form recorded by the model call at `seq` of this run (see recorded-model.ts). Its
 * prompt is not at hand: references in that body's own added elements come back undefined, which
 * only a base older than the recent ones kept can need.
 */
export async function recordedBodyForm(run: DurableRun, seq: number): Promise<{ form: BodyForm; prompt: undefined } | undefined> {
  const rows = await run.store.select<{ output: string | null }>(`SELECT output FROM cairn_journal WHERE run_id = $1 AND seq = $2`, [run.runId, seq]);
  const text = rows[0]?.output;
  if (text === undefined || text === null) return undefined;
  const record = decodeValue(text) as { requestBody?: BodyForm } | undefined;
  return record?.requestBody === undefined ? undefined : { form: record.requestBody, prompt: undefined };
}

function keep(run: DurableRun, seq: number, index: BodyIndex): void {
  let recent = recentBodies.get(run);
  if (recent === undefined) recentBodies.set(run, (recent = new Map()));
  recent.delete(seq);
  recent.set(seq, index);
  for (const oldest of recent.keys()) {
    if (recent.size <= RECENT_BODIES) break;
    recent.delete(oldest);
  }
}

/** The recent body whose array at `path` is the longest prefix of `texts` (ties: the latest). */
function longestBase(recent: Map<number, BodyIndex> | undefined, path: string, texts: string[]): { seq: number; length: number } | undefined {
  let best: { seq: number; length: number } | undefined;
  for (const [seq, index] of recent ?? []) {
    const before = index.arrays.get(path)?.texts;
    if (before === undefined || before.length === 0 || before.length > texts.length) continue;
    if (!before.every((t, i) => texts[i] === t)) continue;
    if (best === undefined || before.length >= best.length) best = { seq, length: before.length };
  }
  return best;
}

interface PromptRef {
  $cairnRef: number;
  p: (string | number)[];
  j?: 1;
}

/** The last prompt indexed by `promptStrings` in each run, and its index. */
const lastIndexed = new WeakMap<DurableRun, { prompt: readonly unknown[]; strings: Map<string, PromptRef> }>();

/**
 * `promptStrings(prompt)`, from the run's last indexed prompt when `prompt` extends it (the memo
 * found all of that prompt's messages equal to this one's first ones): a copy of its index with the
 * new messages' strings added — the same map, entry for entry and in the same order, without
 * serializing the whole conversation again at every call.
 */
function promptStringsOf(run: DurableRun, prompt: readonly unknown[], view: PromptView | undefined): Map<string, PromptRef> {
  const last = lastIndexed.get(run);
  if (last !== undefined && last.prompt === prompt) return last.strings;
  const extendsLast = last !== undefined && view !== undefined && view.previous === last.prompt && view.common === last.prompt.length;
  const strings = extendsLast ? promptStrings(prompt, last.prompt.length, new Map(last.strings)) : promptStrings(prompt, 0, new Map());
  lastIndexed.set(run, { prompt, strings });
  return strings;
}

/**
 * Every long string of the prompt, and the JSON of every value in its messages, with where it is
 * (the first place, in message order), added to `out` from message `from` on.
 */
function promptStrings(prompt: readonly unknown[], from: number, out: Map<string, PromptRef>): Map<string, PromptRef> {
  prompt.forEach((message, i) => {
    if (i < from) return;
    const visit = (value: unknown, path: (string | number)[], depth: number): void => {
      if (typeof value === "string") {
        if (value.length >= REFERENCE_FROM && !out.has(value)) out.set(value, { $cairnRef: i, p: path });
        return;
      }
      if (value === null || typeof value !== "object" || depth > 6 || value instanceof Uint8Array || value instanceof URL) return;
      if (depth >= 1) {
        const json = safeJson(value);
        if (json !== undefined && json.length >= REFERENCE_FROM && !out.has(json)) out.set(json, { $cairnRef: i, p: path, j: 1 });
      }
      if (Array.isArray(value)) value.forEach((item, k) => visit(item, [...path, k], depth + 1));
      else for (const [key, item] of Object.entries(value)) visit(item, [...path, key], depth + 1);
    };
    visit(message, [], 0);
  });
  return out;
}

function safeJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

function parsedJson(text: string): unknown {
  try {
    const value = JSON.parse(text) as unknown;
    return JSON.stringify(value) === text ? value : undefined;
  } catch {
    return undefined;
  }
}
