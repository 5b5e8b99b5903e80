import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { generateText, type ModelMessage } from "ai";
import { afterAll, describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { MockLanguageModel } from "../ai/sdk-matrix.js";
import { answer } from "../ai/scripted-model.js";
import { noScratchCluster, scratchDir, startScratchCluster, type ScratchCluster } from "./fault-harness.js";

// External synchrony (`deferModelCallFsync`) under a power loss of the database server. A private
// PostgreSQL cluster (never the shared server) is stopped with `pg_ctl stop -m immediate`, which
// throws away the WAL still in the server's buffers — what a commit made with
// `synchronous_commit = off` leaves there until someone flushes it. The walwriter is told to wait
// 10 s between flushes, so such a commit stays erasable for the whole test instead of ~200 ms.
//
// The workflow alternates a model call (deferred) and a step whose effect is a line in a file,
// fsynced before the step returns. The property: every effect in the file has, in the database that
// came back, the model-call records of its turn and every turn before it — no effect ever followed
// a record the crash erased. The crash, the restart and the look at the database all happen
// synchronously on this thread, so Cairn cannot repair anything in between.
//
// Without the barrier (the `undurable()` check in src/engine/run/operation.ts taken out) the first
// case fails: the effect of turn k is in the file and turn k's model call is gone.

const unavailable = noScratchCluster();
const TURNS = 6;

describe.skipIf(unavailable !== undefined)("external synchrony on PostgreSQL under a power loss (pg_ctl stop -m immediate)", () => {
  let cluster: ScratchCluster | undefined;
  afterAll(() => cluster?.stop());

  it("no effect ever follows a model-call record the crash erased", async () => {
    cluster = startScratchCluster("-c wal_writer_delay=10s");
    const server = cluster;
    const dir = scratchDir("external-synchrony");
    const log = join(dir, "effects.log");
    closeSync(openSync(log, "a"));
    const violations: string[] = [];
    let crashes = 0;

    /** Crashes the server, brings it back, and checks every effect logged so far against what survived. */
    const crashAndCheck = (): void => {
      server.crash();
      server.start();
      crashes++;
      const models = new Map<string, number>();
      for (const line of server.psql("SELECT run_id, count(*) FROM cairn_steps WHERE kind = 'model' GROUP BY run_id")) {
        const [runId, count] = line.split("\t");
        models.set(runId!, Number(count));
      }
      for (const line of readFileSync(log, "utf8").split("\n")) {
        if (line === "") continue;
        const [runId, turn] = line.split(" ");
        // Turn t's effect depends on model calls 0..t.
        if ((models.get(runId!) ?? 0) < Number(turn) + 1) violations.push(`${line}: ${models.get(runId!) ?? 0} model-call record(s) survived`);
      }
    };

    // Answers by the conversation's length: a call made again after the crash gets the same answer.
    const model = new MockLanguageModel({
      doGenerate: async (call) => answer([{ type: "text", text: `answer ${call.prompt.length}` }]),
    });
    const crashAt = new Map<string, number>();
    const errors: unknown[] = [];
    const cairn = new Cairn({ database: server.url, pollIntervalMs: 20, onError: (error) => errors.push(error) });
    const wf = cairn.workflow("es-agent", async (ctx) => {
      const messages: ModelMessage[] = [];
      for (let turn = 0; turn < TURNS; turn++) {
        messages.push({ role: "user", content: `question ${turn}` });
        const reply = await generateText({ model: ctx.model(model, { deferModelCallFsync: true }), messages, maxRetries: 0 });
        messages.push({ role: "assistant", content: reply.text });
        await ctx.step("effect", () => {
          const fd = openSync(log, "a");
          try {
            writeSync(fd, `${ctx.runId} ${turn}\n`);
            fsyncSync(fd);
          } finally {
            closeSync(fd);
          }
          // The worst moment: right after an effect, before its step commits. Once per run.
          if (crashAt.get(ctx.runId) === turn) {
            crashAt.delete(ctx.runId);
            crashAndCheck();
          }
        });
      }
      return TURNS;
    });
    try {
      await cairn.launch();
      // 1. A crash inside the effect of each turn in turn: deterministic.
      for (let turn = 0; turn < TURNS; turn++) {
        const id = `inside-${turn}`;
        crashAt.set(id, turn);
        await (await wf.start(undefined, { id })).result();
      }
      // 2. Crashes at random moments (a timer that fires between whatever I/O is in flight).
      for (let round = 0; round < 6; round++) {
        const handle = await wf.start(undefined, { id: `random-${round}` });
        const timer = setTimeout(crashAndCheck, Math.floor(Math.random() * 40));
        await handle.result();
        clearTimeout(timer);
      }
      crashAndCheck();
    } finally {
      await cairn.shutdown();
    }
    expect(crashes).toBeGreaterThanOrEqual(TURNS + 1);
    expect(violations).toEqual([]);
    // Every run got past its crash and made all its effects.
    const logged = new Set(
      readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l !== ""),
    );
    for (let turn = 0; turn < TURNS; turn++) expect(logged.has(`inside-0 ${turn}`)).toBe(true);
  }, 180_000);
});
