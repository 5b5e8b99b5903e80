import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as aiTest from "ai/test";
import { MockLanguageModelV3 } from "ai/test";

/**
 * The SDK matrix, like the backend matrix: one test body, run against each AI SDK major the
 * support matrix installs (scripts/test-matrix.sh: ai@6 on the node20 leg, ai@7 on node22/node24).
 * Tests take from here what differs between the majors in the SDK's own API (not in Cairn's):
 * the major's own mock model (v3 under ai@6, v4 under ai@7) and the options a test needs to read
 * what ai@6 returned by default.
 */
const require = createRequire(import.meta.url);
export const sdkMajor = Number((JSON.parse(readFileSync(require.resolve("ai/package.json"), "utf8")) as { version: string }).version.split(".")[0]);

/** The installed major's own mock language model: MockLanguageModelV3 (ai@6) or MockLanguageModelV4 (ai@7). */
export const MockLanguageModel: typeof MockLanguageModelV3 =
  ((aiTest as Record<string, unknown>).MockLanguageModelV4 as typeof MockLanguageModelV3 | undefined) ?? MockLanguageModelV3;

/** ai@7 leaves request and response bodies out of results unless asked; ai@6 includes them. */
export const withBodies: Record<string, unknown> = sdkMajor >= 7 ? { include: { requestBody: true, responseBody: true } } : {};

/** ai@7 refuses system messages in `messages` unless allowed; ai@6 takes them. */
export const systemInMessages: Record<string, unknown> = sdkMajor >= 7 ? { allowSystemInMessages: true } : {};

/** Every step's response messages: `responseMessages` in ai@7, `response.messages` in ai@6. */
export function responseMessages<T>(result: { response: { messages?: T[] } }): T[] {
  return (result as { responseMessages?: T[] }).responseMessages ?? result.response.messages ?? [];
}
/** Its instances, typed as the v3 mock (what tests script: text, tool calls, stream parts, the same in v4). */
export type MockLanguageModel = MockLanguageModelV3;
