import { randomUUID } from "node:crypto";
import { generateText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import fc from "fast-check";
import type { AgentContext } from "../../src/ai/index.js";
import type { ChildExit, ChildWorkflow, SelectBranch, Selected } from "../../src/index.js";

/**
 * Random workflow programs for the replay fuzzer: trees of concurrent branches whose leaves are
 * durable operations with random latencies. Every value an operation returns live is unique (a
 * fresh UUID), so a replay that hands a branch another operation's outcome shows up as a different
 * value at that node. A select or race node observes its winner (key, kind and value), so a replay
 * that picks another winner than live shows up too; a cancel node observes how the child ended.
 */
export type Node =
  | { t: "step"; id: number; ms: number; fail?: boolean }
  | { t: "tool"; id: number; ms: number; body: Node }
  | { t: "model"; id: number; ms: number }
  | { t: "sleep"; id: number; ms: number }
  | { t: "now"; id: number }
  | { t: "mail"; id: number; ms: number }
  | { t: "child"; id: number }
  | { t: "select"; id: number; race: boolean; branches: Branch[] }
  | { t: "cancel"; id: number; ms: number; graceMs: number }
  | { t: "seq"; id: number; items: Node[] }
  | { t: "all"; id: number; items: Node[] }
  | { t: "race"; id: number; items: Node[] };

/**
 * One branch of a `ctx.select` / `ctx.race` node: a child run that takes `ms` to end, a message the
 * program sends itself after a step of `ms`, or a real timer of `ms` (as sleeps use real time).
 */
export type Branch = { k: "child"; ms: number } | { k: "mail"; ms: number } | { k: "timer"; ms: number };

/** The input of the fuzzer's child workflow: `ms` is its step's latency (absent: none). */
export interface ChildInput {
  id: number;
  ms?: number;
}

export interface Program {
  seed: number;
  root: Node;
}

const leaf = (): fc.Arbitrary<Omit<Node, "id">> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.record({ t: fc.constant("step" as const), ms: fc.integer({ min: 0, max: 25 }), fail: fc.boolean() }) },
    { weight: 2, arbitrary: fc.record({ t: fc.constant("model" as const), ms: fc.integer({ min: 0, max: 15 }) }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("sleep" as const), ms: fc.integer({ min: 1, max: 20 }) }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("now" as const) }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("mail" as const), ms: fc.integer({ min: 0, max: 15 }) }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("child" as const) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        t: fc.constant("select" as const),
        race: fc.boolean(),
        branches: fc.array(
          fc.oneof(
            fc.record({ k: fc.constant("child" as const), ms: fc.integer({ min: 0, max: 30 }) }),
            fc.record({ k: fc.constant("mail" as const), ms: fc.integer({ min: 0, max: 30 }) }),
            fc.record({ k: fc.constant("timer" as const), ms: fc.integer({ min: 0, max: 40 }) }),
          ),
          { minLength: 1, maxLength: 3 },
        ),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        t: fc.constant("cancel" as const),
        ms: fc.integer({ min: 0, max: 40 }),
        // 0 is OTP's brutal_kill; a grace period is a select against the child's end.
        graceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 })),
      }),
    },
  );

const shape: fc.Arbitrary<Omit<Node, "id">> = fc.letrec<{ node: Omit<Node, "id"> }>((tie) => ({
  node: fc.oneof(
    { maxDepth: 4, depthIdentifier: "program" },
    { weight: 5, arbitrary: leaf() },
    { weight: 2, arbitrary: fc.record({ t: fc.constant("seq" as const), items: fc.array(tie("node"), { minLength: 1, maxLength: 4 }) }) },
    { weight: 2, arbitrary: fc.record({ t: fc.constant("all" as const), items: fc.array(tie("node"), { minLength: 2, maxLength: 4 }) }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("race" as const), items: fc.array(tie("node"), { minLength: 2, maxLength: 3 }) }) },
    { weight: 1, arbitrary: fc.record({ t: fc.constant("tool" as const), ms: fc.integer({ min: 0, max: 10 }), body: tie("node") }) },
  ),
})).node;

/**
 * Numbers a generated shape's nodes depth-first, so every node has an id to be observed under.
 * Inside a tool, waits that end only by unloading the run (a message, a child's result) are
 * refused by Cairn at the call, so the fuzzer puts a step there instead.
 */
function numbered(node: Omit<Node, "id">, next = { id: 0 }, insideTool = false): Node {
  const id = next.id++;
  const n = node as Node;
  switch (n.t) {
    case "seq":
    case "all":
    case "race":
      return { ...n, id, items: n.items.map((item) => numbered(item, next, insideTool)) };
    case "tool":
      return { ...n, id, body: numbered(n.body, next, true) };
    case "mail":
    case "child":
    case "select":
    case "cancel":
      return insideTool ? { t: "step", id, ms: 3 } : { ...n, id };
    default:
      return { ...n, id };
  }
}

/** Programs for one seed: the same seed always gives the same programs. */
export function programs(seed: number, count: number): Program[] {
  return fc.sample(shape, { seed, numRuns: count }).map((root, i) => ({ seed: seed + i, root: numbered(root) }));
}

export function size(node: Node): number {
  switch (node.t) {
    case "seq":
    case "all":
    case "race":
      return 1 + node.items.reduce((sum, item) => sum + size(item), 0);
    case "tool":
      return 1 + size(node.body);
    default:
      return 1;
  }
}

/**
 * What each run's workflow saw at each node, the first time it saw it (live), and every later
 * disagreement (a replay that saw something else).
 */
export class Observations {
  private readonly seen = new Map<string, string>();
  readonly divergences: string[] = [];

  get size(): number {
    return this.seen.size;
  }

  observe(runId: string, node: number, value: unknown): void {
    const key = `${runId}#${node}`;
    const text = JSON.stringify(value);
    const before = this.seen.get(key);
    if (before === undefined) this.seen.set(key, text);
    else if (before !== text) this.divergences.push(`${runId} node ${node}: live ${before}, replay ${text}`);
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A model whose every answer is new text, after a delay: a recorded call must never be made again. */
export function answeringModel(ms: number): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doGenerate: async () => {
      await pause(ms);
      return {
        content: [{ type: "text", text: `answer ${randomUUID().slice(0, 8)}` }],
        finishReason: { unified: "stop", raw: "stop" },
        usage: {
          inputTokens: { total: 3, noCache: 3, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 2, text: 2, reasoning: undefined },
        },
        warnings: [],
      };
    },
  });
}

/**
 * Runs a program against a run's context, observing every value it sees. Failing steps throw, and
 * the enclosing branch catches and observes the error's message: errors must replay too.
 */
export async function interpret(ctx: AgentContext, node: Node, observations: Observations, child: ChildWorkflow<ChildInput, string>): Promise<unknown> {
  const seen = (value: unknown) => {
    observations.observe(ctx.runId, node.id, value);
    return value;
  };
  switch (node.t) {
    case "step":
      try {
        return seen(
          await ctx.step(`s${node.id}`, async () => {
            await pause(node.ms);
            const value = `s${node.id}:${randomUUID().slice(0, 8)}`;
            if (node.fail) throw new Error(`failed ${value}`);
            return value;
          }),
        );
      } catch (error) {
        return seen(`caught ${(error as Error).message}`);
      }
    case "tool":
      return seen(
        await ctx.step(`tool${node.id}`, async () => {
          await pause(node.ms);
          return { inner: await interpret(ctx, node.body, observations, child) };
        }),
      );
    case "model": {
      const result = await generateText({ model: ctx.model(answeringModel(node.ms)), prompt: `question ${node.id}` });
      return seen(result.text);
    }
    case "sleep":
      await ctx.sleep(`z${node.id}`, node.ms);
      return seen(`slept ${node.id}`);
    case "now":
      return seen(await ctx.now());
    case "mail": {
      const topic = `t${node.id}`;
      // The sender's latency is a step: workflow code waits on nothing outside ctx (docs/replay.md).
      const [, got] = await Promise.all([
        ctx
          .step(`d${node.id}`, () => pause(node.ms).then(() => `mail ${node.id} ${randomUUID().slice(0, 8)}`))
          .then((body) => ctx.send(ctx.runId, topic, body)),
        ctx.recv(topic, { timeoutMs: 60_000 }),
      ]);
      return seen(got);
    }
    case "child": {
      const handle = await ctx.child(child, { id: node.id });
      return seen(await handle.result());
    }
    case "select": {
      // Children first (each a journaled start), then the select, with the program's own senders
      // running beside it: the winner is whatever the select recorded, live or on replay.
      const branches: SelectBranch[] = [];
      const senders: Promise<unknown>[] = [];
      for (const [i, b] of node.branches.entries()) {
        if (b.k === "child") branches.push(await ctx.child(child, { id: node.id * 10 + i, ms: b.ms }));
        else if (b.k === "timer") branches.push({ timeoutMs: b.ms });
        else branches.push({ topic: `t${node.id}.${i}` });
      }
      const waited = node.race ? ctx.race(`x${node.id}`, branches) : ctx.select(`x${node.id}`, branches);
      for (const [i, b] of node.branches.entries()) {
        if (b.k !== "mail") continue;
        senders.push(
          ctx
            .step(`d${node.id}.${i}`, () => pause(b.ms).then(() => `mail ${node.id}.${i} ${randomUUID().slice(0, 8)}`))
            .then((body) => ctx.send(ctx.runId, `t${node.id}.${i}`, body)),
        );
      }
      const [won] = await Promise.all([
        waited.then(
          (value) => ({ won: describeWon(value) }),
          (error: unknown) => ({ caught: `${(error as Error).name}: ${(error as Error).message}` }),
        ),
        ...senders,
      ]);
      return seen(won);
    }
    case "cancel": {
      const handle = await ctx.child(child, { id: node.id * 10, ms: node.ms });
      const exit = await handle.cancel({ graceMs: node.graceMs });
      return seen(exitValue(exit));
    }
    case "seq": {
      const out: unknown[] = [];
      for (const item of node.items) out.push(await interpret(ctx, item, observations, child));
      return seen(out);
    }
    case "all":
      return seen(await Promise.all(node.items.map((item) => interpret(ctx, item, observations, child))));
    case "race":
      return seen(await Promise.race(node.items.map((item) => interpret(ctx, item, observations, child))));
  }
}

/** A select's winner (or a race's value) as plain JSON: a child's error by its name and message. */
function describeWon(value: unknown): unknown {
  if (value === null || typeof value !== "object" || !("kind" in value)) return value;
  const won = value as Selected<number>;
  return won.kind === "child" ? { key: won.key, ...(exitValue(won) as object) } : won;
}

function exitValue(exit: ChildExit): unknown {
  return exit.status === "succeeded"
    ? { child: exit.childId, status: exit.status, value: exit.value }
    : { child: exit.childId, status: exit.status, error: `${(exit.error as Error).name}: ${(exit.error as Error).message}` };
}

/** Smaller programs to try when one fails: each composite node replaced by one of its parts, or by a step. */
export function shrinkCandidates(node: Node): Node[] {
  const out: Node[] = [];
  switch (node.t) {
    case "seq":
    case "all":
    case "race":
      for (const item of node.items) out.push(item);
      if (node.items.length > (node.t === "seq" ? 1 : 2)) {
        node.items.forEach((_, i) => out.push({ ...node, items: node.items.filter((__, j) => j !== i) }));
      }
      node.items.forEach((item, i) => {
        for (const smaller of shrinkCandidates(item)) out.push({ ...node, items: node.items.map((x, j) => (j === i ? smaller : x)) });
      });
      break;
    case "tool":
      out.push(node.body);
      for (const smaller of shrinkCandidates(node.body)) out.push({ ...node, body: smaller });
      break;
    case "select":
      if (node.branches.length > 1) node.branches.forEach((_, i) => out.push({ ...node, branches: node.branches.filter((__, j) => j !== i) }));
      if (node.race) out.push({ ...node, race: false });
      out.push({ t: "step", id: node.id, ms: 5 });
      break;
    case "cancel":
      if (node.graceMs > 0) out.push({ ...node, graceMs: 0 });
      out.push({ t: "step", id: node.id, ms: 5 });
      break;
    default:
      if (node.t !== "step") out.push({ t: "step", id: node.id, ms: 5 });
  }
  return out;
}
