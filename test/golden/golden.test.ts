import { readFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { fromStored } from "../../src/store/value/index.js";
import type { StepRow } from "../../src/store/store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { registerGolden } from "./golden-workflow.js";
import { storeOf } from "../../src/internal.js";

/**
 * Determinism as a tested contract. `golden-journal.json` is the journal of one run of the golden
 * workflow, written by Cairn 0.1. Every later Cairn must replay it to the same output without
 * executing any recorded step; a change to the encoding, the seq numbering or the replay rules
 * that would break runs in flight fails here, loudly.
 *
 * Regenerate only for an intentional, migrated format change: CAIRN_WRITE_GOLDEN=1 npx vitest run test/golden
 */
const GOLDEN = new URL("./golden-journal.json", import.meta.url);

interface Golden {
  input: string;
  output: string;
  steps: StepRow[];
}

describe.each(BACKENDS)("golden journal on $name", (backend) => {
  const env = cairnFactory(backend);

  it.runIf(process.env.CAIRN_WRITE_GOLDEN === "1" && backend.name === "sqlite")("writes the golden journal", async () => {
    const cairn = env.cairn(await env.database());
    const wf = registerGolden(cairn, () => undefined);
    await cairn.launch();
    const run = await wf.start({ customer: "ada", amount: 12_345_678_901_234_567_890n }, { id: "golden-run" });
    await run.result();
    const row = await storeOf(cairn).getRun("golden-run");
    const steps = await storeOf(cairn).loadJournal("golden-run");
    const golden: Golden = { input: row!.input, output: row!.output!, steps };
    writeFileSync(GOLDEN, `${JSON.stringify(golden, null, 2)}\n`);
  });

  it("replays the golden journal to the recorded output without executing a recorded step", async () => {
    const golden = JSON.parse(readFileSync(GOLDEN, "utf8")) as Golden;
    const cairn = env.cairn(await env.database());
    const executed: string[] = [];
    registerGolden(cairn, (what) => executed.push(what));
    await storeOf(cairn).migrate();
    await storeOf(cairn).commit(null, [
      {
        type: "run",
        run: {
          id: "golden-run",
          workflow: "golden",
          status: "enqueued",
          input: { text: golden.input, hash: null },
          parentId: null,
          parentSeq: null,
          rootId: "golden-run",
          appVersion: "default",
          executorId: null,
          deadlineAt: null,
          createdAt: Date.UTC(2026, 0, 1),
          forkedFrom: null,
          forkedFromSeq: null,
        },
      },
      ...golden.steps.map((s) => ({
        type: "step" as const,
        step: {
          runId: s.runId,
          seq: s.seq,
          name: s.name,
          kind: s.kind,
          status: s.status,
          output: s.output === null ? null : { text: s.output, hash: s.outputHash },
          error: s.error,
          startedAt: s.startedAt,
          finishedAt: s.finishedAt,
          attempts: s.attempts,
        },
      })),
    ]);
    await cairn.launch();
    const out = await cairn.run("golden-run").result();
    expect(executed).toEqual([]);
    expect(out).toEqual(fromStored(golden.output));
    expect(golden.steps.map((s) => s.kind)).toEqual([
      "step",
      "now",
      "random",
      "uuid",
      "sleep",
      "send",
      "recv",
      "event",
      "child",
      "child-result",
      "transaction",
      "patch",
      "step",
      "step",
    ]);
  });
});
