import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fingerprintOf } from "../../src/engine/fingerprint.js";
import { PromptMemo } from "../../src/ai/prompt-memo.js";

/**
 * The prompt memo must be invisible: every fingerprint it returns is `fingerprintOf(prompt)` (a
 * journal's recorded fingerprints are compared on replay), and it only reuses a message's hash
 * for a message that encodes exactly as the one it was computed for.
 */

const leaf = fc.oneof(
  fc.string({ maxLength: 80 }),
  fc.integer(),
  fc.constantFrom(0, -0, NaN, Infinity, 1.5),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.bigInt({ min: -1000n, max: 1000n }),
  fc.uint8Array({ maxLength: 8 }),
  fc.date({ noInvalidDate: false }),
  fc.constant(new URL("https://example.com/a.png")),
);
const value = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: "small" },
    leaf,
    fc.array(tie("node"), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom("role", "content", "text", "type", "a", "b"), tie("node"), { maxKeys: 4 }),
  ),
})).node;
const message = fc.record({ role: fc.constantFrom("user", "assistant", "tool"), content: value });

/** A structural copy: new objects, the same leaves (what the AI SDK does to a prompt on every call). */
function rebuilt(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rebuilt);
  if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, rebuilt(x)]));
  }
  return v;
}

describe("prompt memo", () => {
  it("returns fingerprintOf(prompt) for conversations that grow, fork, shrink and change", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom("extend", "extend", "extend", "replace", "truncate", "mutate"), fc.array(message, { maxLength: 3 }), fc.nat()), {
          minLength: 1,
          maxLength: 12,
        }),
        (script) => {
          const memo = new PromptMemo();
          let prompt: unknown[] = [];
          for (const [move, messages, at] of script) {
            if (move === "extend") prompt = [...prompt.map(rebuilt), ...messages];
            else if (move === "replace") prompt = messages;
            else if (move === "truncate") prompt = prompt.slice(0, prompt.length === 0 ? 0 : at % prompt.length).map(rebuilt);
            else if (prompt.length > 0) {
              // In place: the same objects, a changed leaf. A memo that trusted identity would miss it.
              const target = prompt[at % prompt.length] as { content: unknown };
              target.content = messages[0]?.content ?? "changed";
            }
            const view = memo.see(prompt);
            expect(view.fingerprint).toBe(fingerprintOf(prompt));
            expect(view.common).toBeLessThanOrEqual(prompt.length);
          }
        },
      ),
      { numRuns: Number(process.env.CAIRN_PROMPT_MEMO_RUNS ?? 300) },
    );
  });

  it("shares the prefix of an extended prompt, and not a message changed in place", () => {
    const memo = new PromptMemo();
    const first = [{ role: "user", content: [{ type: "text", text: "hello" }] }];
    const a = memo.see(first);
    a.hashes[0] = "h0";
    const second = [...first.map(rebuilt), { role: "assistant", content: "hi" }];
    const b = memo.see(second);
    expect(b.previous).toBe(first);
    expect(b.common).toBe(1);
    expect(b.hashes).toEqual(["h0", undefined]);
    (second[0] as { content: { text: string }[] }).content[0]!.text = "changed";
    const c = memo.see(second);
    expect(c.common).toBe(0);
    expect(c.hashes).toEqual([undefined, undefined]);
    expect(c.fingerprint).toBe(fingerprintOf(second));
    // -0 and 0 encode apart; so do a null-prototype object and a plain one.
    memo.see([{ role: "user", content: 0 }]);
    expect(memo.see([{ role: "user", content: -0 }]).common).toBe(0);
    const bare = Object.assign(Object.create(null) as object, { role: "user" });
    memo.see([{ role: "user" }]);
    expect(memo.see([bare]).common).toBe(0);
  });
});
