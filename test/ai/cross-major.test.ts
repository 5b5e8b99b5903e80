import { copyFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
// @ts-expect-error: plain ESM shared with the fixture's writer (make.mjs), no declarations
import { refundModel, registerRefundAgent } from "../fixtures/sdk-journal/agent.mjs";
import { eventually } from "../harness.js";
import { scratchDir } from "../scratch.js";
import { sdkMajor } from "./sdk-matrix.js";

/**
 * Records do not depend on the AI SDK major that wrote them (src/ai/sdk-version.ts). The fixture
 * journal-ai6.db was written under ai@6 with a v3 model (test/fixtures/sdk-journal/make.mjs): an
 * agent run that made its first model call and waits for a refund's approval. Here, under whichever
 * major this leg installs (ai@7 with its v4 mock on the node22/node24 legs), the run is read and
 * approved: its recorded model call replays (not called again), the tool runs once, and the second
 * call is made live.
 */
describe(`a journal written under AI SDK 6, under AI SDK ${sdkMajor}`, () => {
  let cairn: Cairn | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await cairn?.shutdown();
    cairn = undefined;
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("reads the run, then replays its recorded model call and finishes it", async () => {
    dir = scratchDir("cairn-cross-major-");
    const db = join(dir, "journal.db");
    copyFileSync(new URL("../fixtures/sdk-journal/journal-ai6.db", import.meta.url), db);
    cairn = new Cairn({ database: db, pollIntervalMs: 20 });
    const model = refundModel() as { doGenerateCalls: { prompt: unknown[] }[] };
    const refunds: number[] = [];
    registerRefundAgent(cairn, model, refunds);
    await cairn.launch();

    const [request] = await cairn.approvals.list({ runId: "refund-42" });
    expect(request).toMatchObject({ toolName: "refund", input: { order: 42, cents: 1999 } });
    const calls = await storeOf(cairn).select<{ seq: number; finish_reason: string }>(
      "SELECT seq, finish_reason FROM cairn_model_calls WHERE run_id = 'refund-42' ORDER BY seq",
    );
    expect(calls.map((c) => c.finish_reason)).toEqual(["tool-calls"]);

    await cairn.approvals.approve("refund-42", request!.toolCallId, { by: "ops" });
    const out = (await cairn.run("refund-42").result()) as { text: string; steps: number; reasoningText?: string; toolCalls: unknown[] };
    expect(out.text).toBe('refunded: {"type":"json","value":{"order":42,"cents":1999,"status":"refunded"}}');
    expect(out.steps).toBe(2);
    expect(out.reasoningText).toBe("Order 42 qualifies.");
    expect(refunds).toEqual([42]);
    // Only the second call reached the model: the first was the ai@6 record, replayed.
    expect(model.doGenerateCalls).toHaveLength(1);
    expect(model.doGenerateCalls[0]!.prompt.length).toBeGreaterThan(2);
    await eventually(async () => (await storeOf(cairn!).select("SELECT seq FROM cairn_model_calls WHERE run_id = 'refund-42'")).length === 2);
  });
});
