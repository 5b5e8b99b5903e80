import type { LanguageModelV3, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { generateText, jsonSchema, tool, type ModelMessage } from "ai";
import Database from "better-sqlite3";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Cairn } from "../../src/index.js";
import { conversation, TOOL_NAME, type Turn } from "./agent-conversation.js";
import { CheckpointTimer, checkpointedSize, columnBytes, sum, synchronousOf, type Span, type Synchronous } from "./agent-measures.js";
import { scratchSqlite } from "./scratch-databases.js";
import { median } from "./stats.js";

/**
 * What storing an agent's conversation durably costs: Cairn, which journals each model call with
 * its prompt content-addressed message by message, against a snapshot-per-step design (LangGraph.js
 * with its SQLite checkpointer, which stores the whole state at every super-step). Both store the
 * same messages of the same conversation, each on a fresh SQLite file in WAL mode. LangGraph runs
 * twice: with synchronous=FULL, Cairn's durability (the comparison the goals are judged on), and as
 * it ships (better-sqlite3 builds WAL connections with synchronous=NORMAL: no fsync per commit).
 *
 * The conversation (agent-conversation.ts) has a tool call every few turns; a tool turn is a tool
 * loop's: a model call that asks for the tool, the tool step, a model call that replies.
 *
 * Bytes: the lengths of every text and blob value in the rows each arm writes (ids, hashes and
 * JSON alike; integer columns are left out on both sides). File: the database file's size after
 * `PRAGMA wal_checkpoint(TRUNCATE)`, with the size of its empty schema alongside.
 *
 * Checkpoint time, Cairn: for each model call, the time inside the recorded model (`ctx.model`)
 * minus the time inside the mock it wraps — hashing the prompt's messages, encoding the response,
 * committing the step with its payload and model-call rows; for each tool step, the time of
 * `ctx.step` minus the tool function's. LangGraph: the time inside the checkpointer's `put` and
 * `putWrites` (serializing and committing); its `getTuple` at the start of each `invoke` (loading
 * the snapshot back) is not counted. Garbage-collection pauses inside either arm's checkpoint time
 * are measured and reported alongside (see `CheckpointTimer`).
 *
 * Both arms' scripted models answer in a later turn of the event loop (`answerAsIo`), as a
 * provider's answer over the network does. Answered in the same turn, the conversation never
 * yielded to the event loop except inside Cairn's commit hop, so V8's scheduled scavenges of the AI
 * SDK's per-call garbage (its prompt validation allocates ~100 times what the record does) ran
 * there, and were counted as Cairn's checkpoint time: 30–45 ms of its ~120 at 50 turns.
 */

export interface AgentStorageSettings {
  turns: number;
  /** Every this-many-th turn calls a tool. */
  toolEvery: number;
  rounds: number;
}

export type ArmName = "cairn" | "cairn-deferred" | "langgraph" | "langgraph-default";

export interface ArmMeasurement {
  arm: ArmName;
  /** What the database was asked for, as `PRAGMA synchronous` reports it after the run. */
  synchronous: Synchronous;
  /** Text and blob bytes of the rows written, all tables. */
  bytes: number;
  /** The same bytes by `table.column`: where they go. */
  bytesByColumn: Record<string, number>;
  /** Bytes written by each turn (the growth of `bytes` across it). */
  bytesPerTurn: number[];
  /** Mean bytes per turn over the first and the last `window` turns: flat for O(N), growing for O(N²). */
  firstTurns: TurnWindow;
  lastTurns: TurnWindow;
  fileBytes: number;
  /** The file with the schema and no rows. */
  emptyFileBytes: number;
  /** Median over rounds. */
  checkpointMs: number;
  /** V8 garbage-collection pauses that fell inside the checkpoint time (median over rounds). */
  gcMs: number;
  /** Checkpoint time of each turn, median over rounds. */
  checkpointMsPerTurn: number[];
  /** Commits timed: model calls and tool steps (Cairn), `put` and `putWrites` calls (LangGraph). */
  checkpoints: number;
  /** LangGraph only: time inside `getTuple`, the snapshot loaded back at each `invoke` (median). */
  loadMs: number | null;
  /** Wall time of the whole conversation, median over rounds. */
  runMs: number;
}

export interface TurnWindow {
  bytesPerTurn: number;
  checkpointMsPerTurn: number;
}

export interface AgentStorageReport {
  settings: AgentStorageSettings;
  /** Turns in each of `firstTurns` and `lastTurns`. */
  window: number;
  toolTurns: number;
  modelCalls: number;
  /** The conversation's own text: message contents, tool inputs and results, once each. */
  contentBytes: number;
  arms: ArmMeasurement[];
  /** LangGraph (same durability) ÷ Cairn. */
  storageRatio: number;
  checkpointTimeRatio: number;
  /** LangGraph with the checkpointer's own defaults ÷ Cairn. */
  checkpointTimeRatioVsDefault: number;
  /**
   * LangGraph (same durability) ÷ Cairn with `deferModelCallFsync` (external synchrony: model-call
   * records not fsynced, the fsync forced before each tool step acts and at the end).
   */
  checkpointTimeRatioDeferred: number;
  /** As `checkpointTimeRatio`, with the GC pauses taken out of both sides. */
  checkpointTimeRatioWithoutGc: number;
  measured: { bytes: string; cairnCheckpoint: string; langgraphCheckpoint: string };
}

export const MEASURED = {
  bytes: "length of every text/blob value in the rows written (ids, hashes, JSON); file after wal_checkpoint(TRUNCATE)",
  cairnCheckpoint: "per model call: time inside ctx.model(m) minus time inside the mock; per tool step: ctx.step minus the tool function",
  langgraphCheckpoint: "time inside SqliteSaver.put and putWrites (serialize + commit); not counted: getTuple, the snapshot loaded back at each invoke",
} as const;

export async function agentStorage(settings: AgentStorageSettings, progress: (message: string) => void): Promise<AgentStorageReport> {
  const turns = conversation(settings.turns, settings.toolEvery);
  const arms: Record<ArmName, () => Promise<ArmMeasurement>> = {
    cairn: () => cairnArm(turns),
    "cairn-deferred": () => cairnArm(turns, undefined, true),
    langgraph: () => langGraphArm(turns, "FULL"),
    "langgraph-default": () => langGraphArm(turns, null),
  };
  const order: ArmName[] = ["cairn", "langgraph", "langgraph-default", "cairn-deferred"];
  progress("agent storage: warming up");
  const warmUp = turns.slice(0, 2 * settings.toolEvery);
  await cairnArm(warmUp);
  await cairnArm(warmUp, undefined, true);
  await langGraphArm(warmUp, "FULL");
  const samples = new Map<ArmName, ArmMeasurement[]>(order.map((arm) => [arm, []]));
  for (let round = 0; round < settings.rounds; round++) {
    progress(`agent storage round ${round + 1}/${settings.rounds}: ${settings.turns} turns`);
    for (const arm of round % 2 === 1 ? [...order].reverse() : order) {
      // Each arm starts on a collected heap: LangGraph's megabytes of snapshots otherwise fall to
      // whichever arm runs next, as GC pauses inside its checkpoint time.
      collectGarbage();
      samples.get(arm)!.push(await arms[arm]());
    }
  }
  const window = Math.min(10, Math.floor(settings.turns / 2));
  const merged = order.map((arm) => withWindows(medianOf(samples.get(arm)!), window));
  const [cairn, langgraph, shipped, deferred] = merged as [ArmMeasurement, ArmMeasurement, ArmMeasurement, ArmMeasurement];
  const toolTurns = turns.filter((t) => t.tool !== null).length;
  return {
    settings,
    window,
    toolTurns,
    modelCalls: turns.length + toolTurns,
    contentBytes: turns.reduce(
      (sum, t) =>
        sum + t.user.length + t.reply.length + (t.tool === null ? 0 : JSON.stringify(t.tool.input).length + JSON.stringify(t.tool.result).length),
      0,
    ),
    arms: merged,
    storageRatio: langgraph.bytes / cairn.bytes,
    checkpointTimeRatio: langgraph.checkpointMs / cairn.checkpointMs,
    checkpointTimeRatioVsDefault: shipped.checkpointMs / cairn.checkpointMs,
    checkpointTimeRatioDeferred: langgraph.checkpointMs / deferred.checkpointMs,
    checkpointTimeRatioWithoutGc: (langgraph.checkpointMs - langgraph.gcMs) / (cairn.checkpointMs - cairn.gcMs),
    measured: { ...MEASURED },
  };
}

/** A full garbage collection (V8's `gc`, reached without --expose-gc). */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

/** Bytes from the first round (they do not depend on timing); times are medians over rounds. */
function medianOf(rounds: ArmMeasurement[]): ArmMeasurement {
  const first = rounds[0]!;
  return {
    ...first,
    checkpointMs: median(rounds.map((r) => r.checkpointMs)) ?? 0,
    gcMs: median(rounds.map((r) => r.gcMs)) ?? 0,
    checkpointMsPerTurn: first.checkpointMsPerTurn.map((_, i) => median(rounds.map((r) => r.checkpointMsPerTurn[i] ?? null)) ?? 0),
    loadMs: median(rounds.map((r) => r.loadMs)),
    runMs: median(rounds.map((r) => r.runMs)) ?? 0,
  };
}

/** Filled in once the rounds are merged (see `withWindows`). */
const NO_WINDOW: TurnWindow = { bytesPerTurn: 0, checkpointMsPerTurn: 0 };

function withWindows(arm: ArmMeasurement, window: number): ArmMeasurement {
  const mean = (values: number[]): number => (values.length === 0 ? 0 : sum(values) / values.length);
  const at = (pick: (values: number[]) => number[]): TurnWindow => ({
    bytesPerTurn: mean(pick(arm.bytesPerTurn)),
    checkpointMsPerTurn: mean(pick(arm.checkpointMsPerTurn)),
  });
  return { ...arm, firstTurns: at((v) => v.slice(0, window)), lastTurns: at((v) => v.slice(v.length - window)) };
}

// ---- Cairn --------------------------------------------------------------------------------------

const CAIRN_COLUMNS = {
  cairn_steps: ["run_id", "name", "kind", "status", "output", "output_hash", "error"],
  cairn_payloads: ["hash", "body"],
  cairn_model_calls: ["run_id", "provider", "model_id", "prompt_hash", "prompt_messages", "finish_reason", "text_excerpt", "tool_call_ids"],
};

/**
 * `synchronous`: Cairn's option of that name; the bench's arm passes none (FULL, an fsync per commit).
 * `deferModelCallFsync`: the model's option of that name (external synchrony, arm "cairn-deferred").
 */
export async function cairnArm(turns: Turn[], synchronous?: "NORMAL", deferModelCallFsync = false): Promise<ArmMeasurement> {
  const scratch = scratchSqlite();
  const errors: unknown[] = [];
  const cairn = new Cairn({ database: scratch.database, onError: (error) => errors.push(error), ...(synchronous === undefined ? {} : { synchronous }) });
  let reader: Database.Database | null = null;
  try {
    const mock = scriptedModel(turns);
    const tools = { [TOOL_NAME]: tool({ inputSchema: jsonSchema<{ query: string; limit: number }>({ type: "object" }) }) };
    const timer = new CheckpointTimer();
    const bytesAfterTurn: number[] = [];
    const wf = cairn.workflow("bench-agent-conversation", async (ctx) => {
      const model = timedModel(ctx.model(mock.model, deferModelCallFsync ? { deferModelCallFsync } : {}), (start, end) =>
        timer.add(start, end, mock.lastCall()),
      );
      const messages: ModelMessage[] = [];
      for (const turn of turns) {
        messages.push({ role: "user", content: turn.user });
        if (turn.tool !== null) {
          const use = turn.tool;
          const call = await generateText({ model, messages, tools });
          if (call.toolCalls[0]?.toolCallId !== use.callId) throw new Error(`expected tool call ${use.callId}`);
          messages.push({ role: "assistant", content: [{ type: "tool-call", toolCallId: use.callId, toolName: use.name, input: use.input }] });
          let inTool: Span = [0, 0];
          const t0 = performance.now();
          const result = await ctx.step(use.name, () => {
            const s0 = performance.now();
            const value = structuredClone(use.result);
            inTool = [s0, performance.now()];
            return value;
          });
          timer.add(t0, performance.now(), inTool);
          messages.push({
            role: "tool",
            content: [{ type: "tool-result", toolCallId: use.callId, toolName: use.name, output: { type: "json", value: result } }],
          });
        }
        const reply = await generateText({ model, messages, tools });
        if (reply.text !== turn.reply) throw new Error("the mock's reply did not come back");
        messages.push({ role: "assistant", content: turn.reply });
        timer.endTurn();
        bytesAfterTurn.push(columnBytes(reader!, CAIRN_COLUMNS).total);
      }
      return turns.length;
    });
    // Before the arm's own store opens: it writes and deletes a file of its own.
    const emptyFileBytes = await emptyCairnSize();
    await cairn.launch();
    reader = new Database(scratch.database);
    const begin = performance.now();
    await (await wf.start(turns.length, { id: "conversation" })).result();
    const runMs = performance.now() - begin;
    const times = await timer.stop();
    await cairn.shutdown();
    expectCairnRows(reader, turns);
    const bytes = columnBytes(reader, CAIRN_COLUMNS);
    return {
      arm: deferModelCallFsync ? "cairn-deferred" : "cairn",
      synchronous: synchronous ?? "FULL", // FULL: Cairn's default
      bytes: bytes.total,
      bytesByColumn: bytes.byColumn,
      bytesPerTurn: bytesAfterTurn.map((b, i) => b - (i === 0 ? 0 : bytesAfterTurn[i - 1]!)),
      firstTurns: NO_WINDOW,
      lastTurns: NO_WINDOW,
      fileBytes: checkpointedSize(reader, scratch.database),
      emptyFileBytes,
      ...times,
      loadMs: null,
      runMs,
    };
  } finally {
    await cairn.shutdown();
    reader?.close();
    await scratch.dispose();
    if (errors.length > 0) throw new Error(`Cairn reported ${errors.length} background error(s) during the benchmark`, { cause: errors[0] });
  }
}

/**
 * Cairn's schema alone, in a file of its own: what its database weighs with no rows. Measured
 * apart, as LangGraph's is, because `wal_checkpoint(TRUNCATE)` on the arm's own file would cut
 * the WAL the store wrote out to its working size when it opened (wal-presize.ts), and the
 * conversation's commits would grow it again: a cost no long-running process pays.
 */
async function emptyCairnSize(): Promise<number> {
  const scratch = scratchSqlite();
  try {
    const cairn = new Cairn({ database: scratch.database });
    try {
      await cairn.launch();
    } finally {
      await cairn.shutdown();
    }
    const db = new Database(scratch.database);
    try {
      return checkpointedSize(db, scratch.database);
    } finally {
      db.close();
    }
  } finally {
    await scratch.dispose();
  }
}

/** A wrong count means the arm measured something other than the conversation. */
function expectCairnRows(db: Database.Database, turns: Turn[]): void {
  const toolTurns = turns.filter((t) => t.tool !== null).length;
  const count = (sql: string): number => Number((db.prepare(sql).get() as { n: number }).n);
  const calls = count("SELECT count(*) AS n FROM cairn_model_calls");
  const steps = count("SELECT count(*) AS n FROM cairn_steps WHERE kind = 'step'");
  if (calls !== turns.length + toolTurns || steps !== toolTurns) {
    throw new Error(`expected ${turns.length + toolTurns} model calls and ${toolTurns} tool steps, found ${calls} and ${steps}`);
  }
}

/**
 * A model's answer arrives as I/O does: in a later turn of the event loop (a provider's response is
 * read from a socket). Both arms' scripted models wait for it inside the model's own time, which
 * neither arm's checkpoint time counts, so what V8 schedules for the next turn (a scavenge task)
 * runs where it would with a real provider: while the model is being waited for.
 */
function answerAsIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** An in-process model that answers each call with the conversation's next response, in order. */
function scriptedModel(turns: Turn[]): { model: LanguageModelV3; lastCall: () => Span } {
  const usage = (input: number, output: number): LanguageModelV3GenerateResult["usage"] => ({
    inputTokens: { total: input, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: undefined, reasoning: undefined },
  });
  const responses: LanguageModelV3GenerateResult[] = turns.flatMap((turn, t) => {
    const reply: LanguageModelV3GenerateResult = {
      content: [{ type: "text", text: turn.reply }],
      finishReason: { unified: "stop", raw: "stop" },
      usage: usage(1000 * (t + 1), Math.ceil(turn.reply.length / 4)),
      warnings: [],
    };
    if (turn.tool === null) return [reply];
    const call: LanguageModelV3GenerateResult = {
      content: [{ type: "tool-call", toolCallId: turn.tool.callId, toolName: turn.tool.name, input: JSON.stringify(turn.tool.input) }],
      finishReason: { unified: "tool-calls", raw: "tool_calls" },
      usage: usage(1000 * (t + 1), 40),
      warnings: [],
    };
    return [call, reply];
  });
  let next = 0;
  let last: Span = [0, 0];
  return {
    lastCall: () => last,
    model: {
      specificationVersion: "v3",
      provider: "bench",
      modelId: "scripted",
      supportedUrls: {},
      doGenerate: async () => {
        const t0 = performance.now();
        const response = responses[next++];
        if (response === undefined) throw new Error("the scripted model ran out of responses");
        const copy = structuredClone(response);
        await answerAsIo();
        last = [t0, performance.now()];
        return copy;
      },
      doStream: async () => {
        throw new Error("the agent-storage bench does not stream");
      },
    },
  };
}

/** `inner` with the span of each `doGenerate` reported: the recorded model's view of a call. */
function timedModel(inner: LanguageModelV3, report: (start: number, end: number) => void): LanguageModelV3 {
  return {
    specificationVersion: "v3",
    provider: inner.provider,
    modelId: inner.modelId,
    supportedUrls: inner.supportedUrls,
    doGenerate: async (options) => {
      const t0 = performance.now();
      const result = await inner.doGenerate(options);
      report(t0, performance.now());
      return result;
    },
    doStream: (options) => inner.doStream(options),
  };
}

// ---- LangGraph ----------------------------------------------------------------------------------

const LANGGRAPH_COLUMNS = {
  checkpoints: ["thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint", "metadata"],
  writes: ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "channel", "type", "value"],
};

/**
 * `synchronous: "FULL"` gives the checkpointer Cairn's durability (an fsync per commit). `null`
 * leaves SqliteSaver as it ships: WAL on a better-sqlite3 connection, whose build defaults WAL
 * databases to synchronous=NORMAL (commits reach the WAL without an fsync).
 */
export async function langGraphArm(turns: Turn[], synchronous: "FULL" | null): Promise<ArmMeasurement> {
  const scratch = scratchSqlite();
  const saver = SqliteSaver.fromConnString(scratch.database);
  try {
    saver.db.pragma("journal_mode = WAL");
    if (synchronous !== null) saver.db.pragma(`synchronous = ${synchronous}`);
    const timer = new CheckpointTimer();
    const timed = async <T>(write: () => Promise<T>): Promise<T> => {
      const t0 = performance.now();
      try {
        return await write();
      } finally {
        timer.add(t0, performance.now());
      }
    };
    const put = saver.put.bind(saver);
    const putWrites = saver.putWrites.bind(saver);
    saver.put = (config, checkpoint, metadata) => timed(() => put(config, checkpoint, metadata));
    saver.putWrites = (config, writes, taskId) => timed(() => putWrites(config, writes, taskId));
    let loadMs = 0;
    const getTuple = saver.getTuple.bind(saver);
    saver.getTuple = async (config) => {
      const t0 = performance.now();
      try {
        return await getTuple(config);
      } finally {
        loadMs += performance.now() - t0;
      }
    };

    // The scripted model: the agent node answers with the turn's next AI message.
    const answers: AIMessage[] = turns.flatMap((turn) => [
      ...(turn.tool === null
        ? []
        : [new AIMessage({ content: "", tool_calls: [{ id: turn.tool.callId, name: turn.tool.name, args: turn.tool.input, type: "tool_call" }] })]),
      new AIMessage(turn.reply),
    ]);
    const results = new Map(turns.flatMap((turn) => (turn.tool === null ? [] : [[turn.tool.callId, turn.tool.result] as const])));
    let next = 0;
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("agent", async () => {
        await answerAsIo();
        return { messages: [answers[next++]!] };
      })
      .addNode("tools", (state) => {
        const last = state.messages.at(-1) as AIMessage;
        return {
          messages: (last.tool_calls ?? []).map(
            (call) => new ToolMessage({ tool_call_id: call.id!, name: call.name, content: JSON.stringify(results.get(call.id!)) }),
          ),
        };
      })
      .addEdge(START, "agent")
      .addConditionalEdges("agent", (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END), ["tools", END])
      .addEdge("tools", "agent")
      .compile({ checkpointer: saver });

    const emptyFileBytes = await emptySaverSize();
    const bytesAfterTurn: number[] = [];
    const config = { configurable: { thread_id: "conversation" } };
    let final: BaseMessage[] = [];
    const begin = performance.now();
    for (const turn of turns) {
      final = (await graph.invoke({ messages: [new HumanMessage(turn.user)] }, config)).messages;
      timer.endTurn();
      bytesAfterTurn.push(columnBytes(saver.db, LANGGRAPH_COLUMNS).total);
    }
    const runMs = performance.now() - begin;
    const times = await timer.stop();
    const expected = turns.length * 2 + 2 * turns.filter((t) => t.tool !== null).length;
    if (final.length !== expected) throw new Error(`LangGraph's state holds ${final.length} messages, expected ${expected}`);
    const bytes = columnBytes(saver.db, LANGGRAPH_COLUMNS);
    return {
      arm: synchronous === null ? "langgraph-default" : "langgraph",
      synchronous: synchronousOf(saver.db),
      bytes: bytes.total,
      bytesByColumn: bytes.byColumn,
      bytesPerTurn: bytesAfterTurn.map((b, i) => b - (i === 0 ? 0 : bytesAfterTurn[i - 1]!)),
      firstTurns: NO_WINDOW,
      lastTurns: NO_WINDOW,
      fileBytes: checkpointedSize(saver.db, scratch.database),
      emptyFileBytes,
      ...times,
      loadMs,
      runMs,
    };
  } finally {
    saver.db.close();
    await scratch.dispose();
  }
}

/** The checkpointer's schema alone, in a file of its own: what its database weighs with no rows. */
async function emptySaverSize(): Promise<number> {
  const scratch = scratchSqlite();
  const saver = SqliteSaver.fromConnString(scratch.database);
  try {
    await saver.getTuple({ configurable: { thread_id: "none" } }); // creates the tables
    return checkpointedSize(saver.db, scratch.database);
  } finally {
    saver.db.close();
    await scratch.dispose();
  }
}
