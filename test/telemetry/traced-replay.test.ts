import { describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { interpret, Observations, programs, type Node } from "../fuzz/program.js";
import { otelFactory } from "./otel-harness.js";

/**
 * Tracing does not change what a run does, and a span stands for work done: the replay fuzzer's
 * random programs (concurrent branches, failing steps, tools calling durable operations, model
 * calls, sleeps, messages, child runs) run with an SDK recording every span, replayed after an
 * unload and after a restart at a random moment. Every run must see on replay what it saw live, and
 * every operation span must name a journal row (or say it was abandoned); without a restart, no
 * journal row has two spans. TELEMETRY_FUZZ_PROGRAMS sets the count (default 40 per backend).
 */
const count = Number(process.env.TELEMETRY_FUZZ_PROGRAMS ?? 40);

describe.each(BACKENDS)("traced replay of random programs on $name", (backend) => {
  const env = cairnFactory(backend);
  const otel = otelFactory();

  function register(cairn: Cairn, observations: Observations) {
    const child = cairn.workflow("fuzz-child", async (ctx, input: { id: number }) => ctx.step("c", () => `child ${input.id}`));
    return cairn.workflow("fuzz", async (ctx, input: { root: Node }) => {
      const out = await interpret(ctx, input.root, observations, child);
      await ctx.sleep("end", 5); // unloads: the run is replayed from its journal before it returns
      return out;
    });
  }

  async function run(list: Node[], restartAfterMs: number | null) {
    const { provider, spans } = otel.local();
    const db = await env.database();
    const observations = new Observations();
    let cairn = env.cairn(db, { pollIntervalMs: 50, tracerProvider: provider });
    const fuzz = register(cairn, observations);
    await cairn.launch();
    const ids = list.map((_, i) => `p${i}`);
    await Promise.all(list.map((root, i) => fuzz.start({ root }, { id: ids[i] })));
    if (restartAfterMs !== null) {
      await new Promise((resolve) => setTimeout(resolve, restartAfterMs));
      await cairn.shutdown();
      cairn = env.cairn(db, { pollIntervalMs: 50, tracerProvider: provider });
      register(cairn, observations);
      await cairn.launch();
    }
    for (const id of ids) await cairn.run(id).result();
    expect(observations.divergences).toEqual([]);
    const journal = await storeOf(cairn).select<{ run_id: string; seq: number | string }>("SELECT run_id, seq FROM cairn_steps");
    const rows = new Set(journal.map((r) => `${r.run_id} ${Number(r.seq)}`));
    const perRow = new Map<string, number>();
    for (const span of spans().all) {
      const seq = span.attributes["cairn.step.seq"];
      if (seq === undefined) continue;
      const key = `${String(span.attributes["cairn.run.id"])} ${String(seq)}`;
      if (span.attributes["cairn.step.abandoned"] === true) continue;
      expect(rows.has(key), `span ${span.name} (${key}) names no journal row`).toBe(true);
      perRow.set(key, (perRow.get(key) ?? 0) + 1);
    }
    expect(perRow.size).toBeGreaterThan(0);
    return { perRow, runSpans: spans().named("run fuzz") };
  }

  it(`${count} programs: the same values on replay, one span per journal row`, { timeout: 120_000 }, async () => {
    const list = programs(20261201, count).map((p) => p.root);
    const { perRow, runSpans } = await run(list, null);
    expect([...perRow.entries()].filter(([, n]) => n > 1)).toEqual([]);
    // Every run unloaded at its final sleep and replayed its journal, without spans for it.
    const replayed = runSpans.reduce((sum, s) => sum + Number(s.attributes["cairn.run.replayed_operations"]), 0);
    expect(replayed).toBeGreaterThan(count);
  });

  it(`${count} programs through a restart at a random moment: the same values, and spans only for work done`, { timeout: 120_000 }, async () => {
    await run(
      programs(20261202, count).map((p) => p.root),
      20 + Math.floor(Math.random() * 60),
    );
  });
});
