import type * as AiModule from "ai";
import type * as ProviderModule from "@ai-sdk/provider";
import { createRequire } from "node:module";
import { AiSdkUnavailableError } from "../errors.js";
import { registerSdkErrors } from "./sdk-errors.js";

/**
 * The AI SDK at run time. `ai` and `@ai-sdk/provider` are optional peer dependencies: an
 * application that uses only workflows installs neither, and `import { Cairn } from "cairn"` works
 * without them. This module looks for them once, when Cairn is imported (a dynamic import that may
 * fail), and registers their error classes with the journal when they are there; what needs them
 * (`cairn/ai`, `cairn.agent` runs, `ctx.model` calls) asks `sdk()`, which throws an
 * `AiSdkUnavailableError` naming the versions Cairn supports when they are missing or of another
 * major. Nothing in src imports `ai` or `@ai-sdk/provider` at run time except through here.
 */

export interface Sdk {
  ai: typeof AiModule;
  provider: typeof ProviderModule;
  /** 6 or 7. */
  major: number;
}

export const SUPPORTED = "ai@6 with @ai-sdk/provider@3, or ai@7 with @ai-sdk/provider@4";
const PAIRS: Record<number, number> = { 6: 3, 7: 4 };

const require = createRequire(import.meta.url);

function versionOf(name: string): string | undefined {
  try {
    return (require(`${name}/package.json`) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

async function load(): Promise<Sdk | AiSdkUnavailableError> {
  let ai: typeof AiModule;
  let provider: typeof ProviderModule;
  try {
    [ai, provider] = await Promise.all([import("ai"), import("@ai-sdk/provider")]);
  } catch (error) {
    const found = [`ai ${versionOf("ai") ?? "not installed"}`, `@ai-sdk/provider ${versionOf("@ai-sdk/provider") ?? "not installed"}`].join(", ");
    return new AiSdkUnavailableError(
      `Cairn's AI features need the Vercel AI SDK (${SUPPORTED}); found ${found}. Install it: npm install ai@7 @ai-sdk/provider@4 (Node ≥ 22) or ai@6 @ai-sdk/provider@3`,
      { cause: error },
    );
  }
  const aiVersion = versionOf("ai") ?? "";
  const providerVersion = versionOf("@ai-sdk/provider") ?? "";
  const major = Number(aiVersion.split(".")[0]);
  const providerMajor = Number(providerVersion.split(".")[0]);
  if (PAIRS[major] === undefined || PAIRS[major] !== providerMajor) {
    return new AiSdkUnavailableError(
      `Cairn's AI features support ${SUPPORTED}; found ai ${aiVersion || "?"} with @ai-sdk/provider ${providerVersion || "?"}`,
    );
  }
  registerSdkErrors(ai as unknown as Record<string, unknown>, provider as unknown as Record<string, unknown>);
  return { ai, provider, major };
}

const loaded = await load();

/** The installed AI SDK, or an AiSdkUnavailableError saying what is missing. */
export function sdk(): Sdk {
  if (loaded instanceof AiSdkUnavailableError) throw loaded;
  return loaded;
}

/** Whether a supported AI SDK is installed. */
export function sdkAvailable(): boolean {
  return !(loaded instanceof AiSdkUnavailableError);
}
