import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeValueWalked } from "../../src/store/value/codec.js";
import { UnserializableError } from "../../src/errors.js";
import { decodeValue, encodeValue, MAX_DEPTH } from "../../src/store/value/index.js";

/**
 * `encodeValue` returns plain data's JSON without copying it first (codec.ts, plainShape) — and plain data with undefined values by `JSON.stringify` with a replacer that tags them. The
 * journal's texts must not change by a byte: every value encodes as the full walk encodes it, and
 * what the walk refuses is still refused.
 */
function outcome(encode: () => string): { text: string } | { refused: string } {
  try {
    return { text: encode() };
  } catch (error) {
    return { refused: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

describe("the codec's plain-data shortcut", () => {
  it("writes exactly the text of the full walk, for any value", () => {
    const tagged = fc.oneof(
      fc.constantFrom(-0, NaN, Infinity, undefined, new Date(5), new Date(NaN), { $c: "looks like a tag" }, { toJSON: "data" }),
      fc.bigInt(),
      fc.uint8Array({ maxLength: 4 }),
      fc.constant(Object.assign(Object.create(null) as object, { a: 1 })),
      fc.constant({ [Symbol.for("brand")]: 1, a: 2 }),
      fc.constant(new Map([[1, 2]])),
      fc.constant([1, , 3]),
    );
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        fc.jsonValue({ maxDepth: 2 }),
        tagged,
        fc.array(tie("node"), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 4 }), tie("node"), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, (v) => {
        // The same text, or the same refusal (an own "__proto__" key, say).
        expect(outcome(() => encodeValue(v, "test"))).toEqual(outcome(() => encodeValueWalked(v, "test")));
      }),
      { numRuns: Number(process.env.CAIRN_CODEC_RUNS ?? 2000) },
    );
  });

  it("still refuses cycles and nesting past MAX_DEPTH inside plain data", () => {
    const cyclic: Record<string, unknown> = { a: [1, 2] };
    cyclic.self = { back: cyclic };
    expect(() => encodeValue(cyclic, "test")).toThrow(UnserializableError);
    let deep: unknown = "leaf";
    for (let i = 0; i < MAX_DEPTH + 5; i++) deep = [deep];
    expect(() => encodeValue(deep, "test")).toThrow(UnserializableError);
    let fits: unknown = "leaf";
    for (let i = 0; i < MAX_DEPTH - 1; i++) fits = [fits];
    expect(decodeValue(encodeValue(fits, "test"))).toEqual(fits);
    expect(() => encodeValue({ ok: 1, date: new Date(0), bad: { f: () => 1 } }, "test")).toThrow(/a function/);
  });
});
