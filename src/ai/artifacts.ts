import { CairnError, InvalidSpecError, TerminalError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import { fromStored, hashText, toStored } from "../store/value/index.js";
import type { WriteOp } from "../store/store.js";

/** What names an artifact: its row in `cairn_artifacts`. */
export interface ArtifactRef {
  /** `runId:seq` of the step that put it: stable across replays. */
  id: string;
  name: string;
  mediaType: string;
  /** sha256 of the stored content: the key of its `cairn_payloads` row. */
  hash: string;
  /** Bytes. */
  size: number;
}

export interface Artifact extends ArtifactRef {
  bytes: Uint8Array;
}

export interface PutOptions {
  /** Default "text/plain; charset=utf-8" for a string, "application/octet-stream" for bytes. */
  mediaType?: string;
}

/**
 * Files an agent produces (reports, images, datasets), kept in the database: content-addressed in
 * `cairn_payloads` — identical bytes are stored once however many artifacts name them — and
 * described by one row of `cairn_artifacts` each, linked to the run and step that made it.
 *
 * Every method is a durable operation (kind "artifact"): it takes a seq when it is called and
 * its outcome is recorded, so replay returns what the first execution saw.
 */
export interface Artifacts {
  /**
   * Stores `content` (a string is stored as its UTF-8 bytes) and returns the artifact's reference.
   *
   * Failure semantics: the payload, the artifact row and the step's checkpoint (`put:<name>`)
   * commit in one transaction: exactly once. Replay after a crash returns the recorded reference
   * and writes nothing; a crash before the commit writes nothing and recovery stores it again
   * under the same id. The journal records the reference, not the bytes.
   */
  put(name: string, content: Uint8Array | string, options?: PutOptions): Promise<ArtifactRef>;

  /**
   * Reads an artifact by id — this run's or any other's.
   *
   * Failure semantics: the reference read is recorded (step `get:<id>`) and replayed as recorded;
   * an unknown id records a TerminalError, which replay throws again. The bytes are not copied
   * into the journal: after a replay they are read again by the recorded hash, which always names
   * the same bytes (a content address never changes what it holds).
   */
  get(id: string): Promise<Artifact>;

  /**
   * The artifacts this run has put so far, in the order it put them. Failure semantics: the list
   * is recorded (step `list`) and replayed as recorded. It is built from the run's journal, so a
   * forked run lists the artifacts its copied journal put, and a `put` not yet awaited may be
   * missing.
   */
  list(): Promise<ArtifactRef[]>;
}

/** Per loaded run: the artifacts its journal has put, rebuilt on replay by `onRecorded`. */
const putByRun = new WeakMap<DurableRun, Map<number, ArtifactRef>>();

export function artifactsFor(run: DurableRun): Artifacts {
  let put = putByRun.get(run);
  if (put === undefined) putByRun.set(run, (put = new Map()));
  const known = put;
  return {
    put: async (name, content, options = {}) => {
      if (typeof name !== "string" || name.length === 0) throw new InvalidSpecError("name", name, "an artifact needs a non-empty name");
      if (typeof content !== "string" && !(content instanceof Uint8Array)) {
        throw new InvalidSpecError("content", content, `artifact "${name}" must be a string or a Uint8Array`);
      }
      const mediaType = options.mediaType ?? (typeof content === "string" ? "text/plain; charset=utf-8" : "application/octet-stream");
      if (typeof mediaType !== "string" || mediaType.length === 0) {
        throw new InvalidSpecError("mediaType", mediaType, `artifact "${name}" needs a non-empty media type`);
      }
      let text = "";
      return run.operation<ArtifactRef>({
        kind: "artifact",
        name: `put:${name}`,
        execute: ({ seq }) => {
          const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
          const stored = toStored(bytes, `artifact "${name}"`);
          text = stored.text;
          // Every artifact gets a payload row, short or long; a long one's hash is the one the
          // journal would give the same bytes, so the two share a row.
          const hash = stored.hash ?? hashText(stored.text);
          return { id: `${run.runId}:${seq}`, name, mediaType, hash, size: bytes.byteLength };
        },
        alsoWrite: (outcome, seq): WriteOp[] => {
          if (!outcome.ok) return [];
          const ref = outcome.value;
          const now = run.clock.now();
          return [
            {
              type: "insert",
              table: "cairn_payloads",
              values: { hash: ref.hash, body: text, size: text.length, created_at: now },
              onConflict: { keys: ["hash"], action: "ignore" },
            },
            {
              type: "insert",
              table: "cairn_artifacts",
              values: {
                id: ref.id,
                name: ref.name,
                media_type: ref.mediaType,
                hash: ref.hash,
                size: ref.size,
                run_id: run.runId,
                seq,
                created_at: now,
              },
              onConflict: { keys: ["id"], action: "ignore" },
            },
          ];
        },
        onRecorded: (ref, seq) => known.set(seq, ref),
      });
    },

    get: async (id) => {
      if (typeof id !== "string" || id.length === 0) throw new InvalidSpecError("id", id, "an artifact id is a non-empty string");
      const live: { body?: string | null } = {};
      const ref = await run.operation<ArtifactRef>({
        kind: "artifact",
        name: `get:${id}`,
        execute: async () => {
          const [row] = await run.store.select<ArtifactRow>(
            `SELECT a.id, a.name, a.media_type, a.hash, a.size, p.body
             FROM cairn_artifacts a LEFT JOIN cairn_payloads p ON p.hash = a.hash WHERE a.id = $1`,
            [id],
          );
          if (row === undefined) {
            throw new TerminalError(`no artifact with id "${id}" (run ${run.runId}): ids are the \`id\` that artifacts.put returned`);
          }
          live.body = row.body;
          return { id: row.id, name: row.name, mediaType: row.media_type, hash: row.hash, size: Number(row.size) };
        },
      });
      let body = live.body ?? null;
      if (live.body === undefined) {
        // Replayed: read the bytes again by their content address.
        const [payload] = await run.store.select<{ body: string }>("SELECT body FROM cairn_payloads WHERE hash = $1", [ref.hash]);
        body = payload?.body ?? null;
      }
      if (body === null) throw new CairnError(`artifact "${id}" refers to payload ${ref.hash}, which is missing from cairn_payloads`);
      return { ...ref, bytes: fromStored(body) as Uint8Array };
    },

    list: () =>
      run.operation<ArtifactRef[]>({
        kind: "artifact",
        name: "list",
        execute: () => [...known.entries()].sort(([a], [b]) => a - b).map(([, ref]) => ref),
      }),
  };
}

interface ArtifactRow {
  id: string;
  name: string;
  media_type: string;
  hash: string;
  size: number | string;
  body: string | null;
}
