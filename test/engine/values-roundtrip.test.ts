import { readFileSync } from "node:fs";
import { APICallError } from "@ai-sdk/provider";
import { RetryError } from "ai";
import { describe, expect, it } from "vitest";
import { InvalidSpecError, RetryableError, TerminalError, UnserializableError, registerErrorClass, type WorkflowContext } from "../../src/index.js";
import { decodeThrown, decodeValue, encodeThrown, encodeValue } from "../../src/store/value/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

/** A user's error class with its own fields, registered so that it comes back as itself. */
class PaymentDeclinedError extends Error {
  override readonly name = "PaymentDeclinedError";
  constructor(
    readonly orderId: string,
    readonly retryAfterMs: number,
  ) {
    super(`order ${orderId} was declined`);
  }
}
registerErrorClass(PaymentDeclinedError);

/** Not registered: comes back as an Error with the same name and fields. */
class UnregisteredError extends Error {}

function hostileValues(): Record<string, unknown> {
  const nullProto = Object.create(null) as Record<string, unknown>;
  nullProto.x = 1;
  return {
    negativeZero: -0,
    invalidDate: new Date(NaN),
    date: new Date(Date.UTC(2026, 5, 1)),
    holes: [1, , 3, , ,],
    buffer: Buffer.from("héllo"),
    bytes: new Uint8Array([1, 2, 3]),
    nan: NaN,
    infinity: -Infinity,
    big: 2n ** 70n,
    map: new Map<unknown, unknown>([
      [1, { a: undefined }],
      ["k", new Set([[-0]])],
    ]),
    nullProto,
    marked: { [Symbol.for("app.brand")]: true, v: 1 },
    tagLike: { $c: "Date", v: 0 },
    undef: undefined,
  };
}

function hostileThrows(): Record<string, unknown> {
  const selfCause = new Error("I caused myself");
  (selfCause as { cause?: unknown }).cause = selfCause;
  const a = new TypeError("a");
  const b = new RangeError("b", { cause: a });
  (a as { cause?: unknown }).cause = b;
  const withFields = Object.assign(new Error("rate limited"), { statusCode: 429, isRetryable: true, retryAfterMs: 1_500, detail: { tier: "free" } });
  return {
    string: "boom",
    number: 42,
    null: null,
    undefinedCause: new Error("no cause", { cause: undefined }),
    object: { code: "E_PLAIN", at: new Date(0) },
    typeError: new TypeError("not a function"),
    syntaxError: new SyntaxError("bad"),
    withFields,
    registered: new PaymentDeclinedError("o-1", 2_000),
    unregistered: Object.assign(new UnregisteredError("odd"), { extra: [1, 2] }),
    terminal: new TerminalError("stop"),
    retryable: new RetryableError("again", { cause: "a string cause" }),
    selfCause,
    cycle: b,
    aggregate: new AggregateError([new RangeError("r"), "s", new PaymentDeclinedError("o-2", 5)], "several"),
    apiCall: new APICallError({
      message: "Service Unavailable",
      url: "https://api.example.com/v1/chat",
      requestBodyValues: { model: "m" },
      statusCode: 503,
      responseHeaders: { "retry-after": "2" },
      responseBody: '{"error":"overloaded"}',
      cause: new TypeError("fetch failed"),
    }),
    retryError: new RetryError({ message: "gave up", reason: "maxRetriesExceeded", errors: [new Error("first"), new Error("second")] }),
  };
}

/** What a workflow saw of each step: a value, or what was thrown. */
type Seen = Record<string, { value: unknown } | { thrown: unknown }>;

async function observe(ctx: WorkflowContext, values: Record<string, unknown>, throws: Record<string, unknown>): Promise<Seen> {
  const seen: Seen = {};
  for (const [name, value] of Object.entries(values)) seen[`returns ${name}`] = { value: await ctx.step(`returns ${name}`, () => value) };
  for (const [name, thrown] of Object.entries(throws)) {
    seen[`throws ${name}`] = await ctx
      .step(`throws ${name}`, () => Promise.reject(thrown))
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ thrown: error }),
      );
  }
  return seen;
}

describe.each(BACKENDS)("values and errors across replay on $name", (backend) => {
  const env = cairnFactory(backend);

  it("gives back on replay exactly what each step returned or threw live", async () => {
    const clock = new ManualClock();
    // Replay is what this is about: no warm continuation (test/engine/warm-runs.test.ts has those).
    const cairn = env.cairn(await env.database(), { clock, warmRuns: { maxRuns: 0 } });
    const executions: Seen[] = [];
    const wf = cairn.workflow("hostile", async (ctx) => {
      const seen = await observe(ctx, hostileValues(), hostileThrows());
      executions.push(seen);
      await ctx.sleep("unload", 1_000); // the run unloads; waking replays every step above
      return "done";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "hostile" });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(1_000);
    expect(await run.result()).toBe("done");
    expect(executions).toHaveLength(2);
    const [live, replayed] = executions as [Seen, Seen];
    expect(Object.keys(replayed)).toEqual(Object.keys(live));
    // Everything but the unregistered class comes back strictly equal (prototypes, holes, -0, fields).
    for (const key of Object.keys(live)) if (key !== "throws unregistered") expect(replayed[key], key).toStrictEqual(live[key]);

    const value = (key: string) => (replayed[`returns ${key}`] as { value: unknown }).value;
    const thrown = (key: string) => (replayed[`throws ${key}`] as { thrown: unknown }).thrown;
    expect(Object.is(value("negativeZero"), -0)).toBe(true);
    expect(Number.isNaN((value("invalidDate") as Date).getTime())).toBe(true);
    const holes = value("holes") as unknown[];
    expect([holes.length, 1 in holes, 0 in holes]).toEqual([5, false, true]);
    expect(Buffer.isBuffer(value("buffer"))).toBe(true);
    expect(Buffer.isBuffer(value("bytes"))).toBe(false);
    expect(Object.getPrototypeOf(value("nullProto"))).toBe(null);
    expect((value("marked") as Record<symbol, unknown>)[Symbol.for("app.brand")]).toBe(true);
    expect(value("tagLike")).toEqual({ $c: "Date", v: 0 });
    expect(Object.is((value("map") as Map<string, Set<number[]>>).get("k")?.values().next().value?.[0], -0)).toBe(true);

    expect([thrown("string"), thrown("number"), thrown("null")]).toEqual(["boom", 42, null]);
    expect(thrown("object")).toEqual({ code: "E_PLAIN", at: new Date(0) });
    expect(thrown("typeError")).toBeInstanceOf(TypeError);
    expect(thrown("syntaxError")).toBeInstanceOf(SyntaxError);
    const noCause = thrown("undefinedCause") as Error;
    expect(["cause" in noCause, noCause.cause]).toEqual([true, undefined]);
    expect(thrown("withFields")).toMatchObject({
      message: "rate limited",
      statusCode: 429,
      isRetryable: true,
      retryAfterMs: 1_500,
      detail: { tier: "free" },
    });
    const registered = thrown("registered") as PaymentDeclinedError;
    expect(registered).toBeInstanceOf(PaymentDeclinedError);
    expect([registered.orderId, registered.retryAfterMs, registered.name, registered.message]).toEqual([
      "o-1",
      2_000,
      "PaymentDeclinedError",
      "order o-1 was declined",
    ]);
    const unregistered = thrown("unregistered") as Error & { extra: number[] };
    expect([unregistered instanceof Error, unregistered instanceof UnregisteredError, unregistered.extra]).toEqual([true, false, [1, 2]]);
    expect(thrown("terminal")).toBeInstanceOf(TerminalError);
    expect((thrown("retryable") as Error).cause).toBe("a string cause");
    const self = thrown("selfCause") as Error;
    expect(self.cause).toBe(self);
    const cycle = thrown("cycle") as Error;
    expect([cycle instanceof RangeError, cycle.cause instanceof TypeError, (cycle.cause as Error).cause]).toEqual([true, true, cycle]);
    const aggregate = thrown("aggregate") as AggregateError;
    expect(aggregate).toBeInstanceOf(AggregateError);
    expect(aggregate.errors[0]).toBeInstanceOf(RangeError);
    expect(aggregate.errors[1]).toBe("s");
    expect(aggregate.errors[2]).toBeInstanceOf(PaymentDeclinedError);
    const api = thrown("apiCall") as APICallError;
    expect([api instanceof APICallError, APICallError.isInstance(api), api.statusCode, api.isRetryable, api.url, api.responseBody]).toEqual([
      true,
      true,
      503,
      true,
      "https://api.example.com/v1/chat",
      '{"error":"overloaded"}',
    ]);
    expect(api.responseHeaders).toEqual({ "retry-after": "2" });
    expect(api.cause).toBeInstanceOf(TypeError);
    const retry = thrown("retryError") as RetryError;
    expect([RetryError.isInstance(retry), retry.reason, retry.errors.length, (retry.lastError as Error).message]).toEqual([
      true,
      "maxRetriesExceeded",
      2,
      "second",
    ]);
  });

  it("refuses at the call what it cannot keep, naming the path, and replays the same refusal", async () => {
    const cairn = env.cairn(await env.database());
    const executions: unknown[][] = [];
    let deep: Record<string, unknown> = {};
    const deepRoot = deep;
    for (let i = 0; i < 5_000; i++) deep = deep.next = {};
    const refusals = {
      localSymbol: () => ({ [Symbol("secret")]: 1 }),
      protoKey: () => JSON.parse('{"safe": 1, "__proto__": {"polluted": true}}') as unknown,
      tooDeep: () => deepRoot,
      thrownWithFunction: () => {
        throw Object.assign(new Error("has a callback"), { retry: () => undefined });
      },
      thrownClassInstance: () => {
        throw new (class Response {})();
      },
    };
    const wf = cairn.workflow("refusals", async (ctx) => {
      const seen: unknown[] = [];
      for (const [name, fn] of Object.entries(refusals)) {
        seen.push(
          await ctx.step(name, fn).then(
            () => "stored?",
            (error: unknown) => error,
          ),
        );
      }
      executions.push(seen);
      return seen.length;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "refusals" });
    expect(await run.result()).toBe(5);
    const fork = await cairn.fork("refusals", { fromSeq: 5, id: "refusals-replayed" });
    expect(await fork.result()).toBe(5);
    const [live, replayed] = executions as [Error[], Error[]];
    for (const error of live) expect(error).toBeInstanceOf(UnserializableError);
    expect(replayed.map((e) => [e.name, e.message])).toEqual(live.map((e) => [e.name, e.message]));
    expect(live[0]!.message).toMatch(/value\[Symbol\(secret\)\]/);
    expect(live[1]!.message).toMatch(/value\["__proto__"\]/);
    expect(live[2]!.message).toMatch(/deeper than 1000 levels/);
    expect(live[3]!.message).toMatch(/error\.retry — it is a function.*What was thrown: Error: has a callback/);
    expect(live[4]!.message).toMatch(/instance of class Response/);
  });

  it("keeps a thrown string, number and null as the run's error too", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("throws-string", async (ctx, what: unknown) => {
      await ctx.step("fails", () => Promise.reject(what));
    });
    await cairn.launch();
    for (const [i, what] of ["plain string", 7, null].entries()) {
      const run = await wf.start(what, { id: `throws-${i}` });
      await expect(run.result()).rejects.toBe(what);
      expect((await run.status()).error).toBe(what);
      const [row] = await storeOf(cairn).loadJournal(`throws-${i}`);
      expect(row?.status).toBe("failed");
      // The CLI reads name and message; they describe the value.
      expect(JSON.parse(row!.error!)).toMatchObject({ name: `thrown ${what === null ? "null" : typeof what}` });
    }
  });

  // Passes once the engine records a step by a `failed` flag instead of `error !== undefined`
  // (RunExecution.record, see the report of this change); until then the step is journaled as
  // succeeded. Flip to `it` then.
  it("journals a step that throws undefined as failed, and replays the throw", async () => {
    const cairn = env.cairn(await env.database());
    let calls = 0;
    const wf = cairn.workflow("throws-undefined", async (ctx) => {
      const outcome = await ctx
        .step("nothing", () => {
          calls++;
          return Promise.reject(undefined);
        })
        .then(
          () => "returned",
          (error: unknown) => ({ threw: error }),
        );
      await ctx.step("after", () => "after");
      return outcome;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "throws-undefined" });
    expect(await run.result()).toEqual({ threw: undefined });
    const [row] = await storeOf(cairn).loadJournal("throws-undefined");
    expect(row?.status).toBe("failed");
    const fork = await cairn.fork("throws-undefined", { fromSeq: 1, id: "throws-undefined-replayed" });
    expect(await fork.result()).toEqual({ threw: undefined });
    expect(calls).toBe(1);
  });
});

describe("the value codec", () => {
  it("decodes the golden journal exactly as it was written", () => {
    const golden = JSON.parse(readFileSync(new URL("../golden/golden-journal.json", import.meta.url), "utf8")) as {
      output: string;
      steps: { output: string | null; error: string | null; kind: string }[];
    };
    for (const text of [golden.output, ...golden.steps.flatMap((s) => (s.output === null || s.kind === "recv" ? [] : [s.output]))]) {
      expect(encodeValue(decodeValue(text), "golden")).toBe(text);
    }
    const failed = golden.steps.find((s) => s.error !== null)!;
    const error = decodeThrown(failed.error!) as Error;
    expect([error instanceof RangeError, error.name, error.message]).toEqual([true, "RangeError", "declined"]);
    expect(error.stack).toBe((JSON.parse(failed.error!) as { stack: string }).stack);
  });

  it("refuses nesting deeper than the limit with an UnserializableError, not a RangeError", () => {
    let deep: unknown[] = [];
    const root = deep;
    for (let i = 0; i < 100_000; i++) deep.push((deep = []));
    expect(() => encodeValue(root, "deep")).toThrow(UnserializableError);
    let chain: Error = new Error("bottom");
    for (let i = 0; i < 5_000; i++) chain = new Error(`level ${i}`, { cause: chain });
    expect(() => encodeThrown(chain, "deep")).toThrow(UnserializableError);
    let ok: unknown[] = [];
    const fine = ok;
    for (let i = 0; i < 990; i++) ok.push((ok = []));
    expect(decodeValue(encodeValue(fine, "ok"))).toEqual(fine);
  });

  it("keeps the registry's contract: a class that extends Error, one class per name", () => {
    expect(() => registerErrorClass(class NotAnError {} as never)).toThrow(InvalidSpecError);
    class PaymentDeclinedErrorV2 extends Error {}
    expect(() => registerErrorClass(PaymentDeclinedErrorV2, { name: "PaymentDeclinedError" })).toThrow(/another error class/);
    registerErrorClass(PaymentDeclinedError); // the same class again is harmless
    registerErrorClass(PaymentDeclinedErrorV2, { name: "PaymentDeclinedError.v2" });
    expect(decodeThrown(encodeThrown(new PaymentDeclinedErrorV2("x"), "v2"))).toBeInstanceOf(PaymentDeclinedErrorV2);
  });
});
