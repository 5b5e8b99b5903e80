import { seededRandom } from "../util/random.js";
import type { JSONValue } from "ai";

/**
 * The agent-storage bench's conversation: `turns` turns, each a user message and an assistant
 * reply of 400–1,000 characters; every `toolEvery`-th turn the assistant first calls a tool, whose
 * result is 1–2 KB of JSON, and replies after it. The text is pseudo-random words from a seeded
 * PRNG: the same on every run and machine, and not the repetition a page could shrink.
 */
export interface ToolUse {
  callId: string;
  name: string;
  input: { [key: string]: JSONValue };
  result: JSONValue;
}

export interface Turn {
  user: string;
  tool: ToolUse | null;
  reply: string;
}

export const TOOL_NAME = "search_orders";

export function conversation(turns: number, toolEvery: number): Turn[] {
  const random = seededRandom(0x5eed_ca1d);
  const between = (min: number, max: number): number => min + Math.floor(random() * (max - min + 1));
  const words = (length: number): string => {
    let out = "";
    while (out.length < length) {
      const sentence = Array.from({ length: between(6, 18) }, () => word(random, between(1, 10))).join(" ");
      out += (out === "" ? "" : " ") + sentence[0]!.toUpperCase() + sentence.slice(1) + ".";
    }
    return out.slice(0, length);
  };
  return Array.from({ length: turns }, (_, t): Turn => {
    const user = words(between(400, 1000));
    let toolUse: ToolUse | null = null;
    if ((t + 1) % toolEvery === 0) {
      const target = between(1000, 2000);
      const results: JSONValue[] = [];
      while (JSON.stringify(results).length < target) {
        results.push({
          id: `ord_${word(random, 10)}`,
          title: words(between(20, 40)),
          snippet: words(between(100, 200)),
          score: Math.round(random() * 1000) / 1000,
        });
      }
      toolUse = {
        callId: `call_${t}_${word(random, 12)}`,
        name: TOOL_NAME,
        input: { query: words(between(40, 80)), limit: results.length },
        result: { results },
      };
    }
    return { user, tool: toolUse, reply: words(between(400, 1000)) };
  });
}

function word(random: () => number, length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) out += String.fromCharCode(97 + Math.floor(random() * 26));
  return out;
}
