import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { SdkLanguageModel as LanguageModelV3 } from "../../ai/sdk-version.js";
import { CliError } from "../cli-error.js";

/**
 * The demo's model: by default the mock LLM, which the demo starts on loopback (scripted, offline,
 * deterministic); or any OpenAI-compatible provider named by the environment. Either way the worker
 * reaches it through these three variables, which the demo sets for the mock.
 */
export const MODEL_ENV = { baseURL: "CAIRN_DEMO_BASE_URL", modelId: "CAIRN_DEMO_MODEL", apiKey: "CAIRN_DEMO_API_KEY" } as const;

export const MOCK_MODEL_ID = "mock-1";
/** How long the mock LLM takes to answer: long enough that the timeline reads like a model's. */
export const MOCK_LATENCY_MS = 100;

export interface ModelConfig {
  /** OpenAI-compatible, ending in `/v1` as a rule: `http://127.0.0.1:4010/v1`. */
  baseURL: string;
  modelId: string;
  apiKey: string | undefined;
  /** The mock LLM the demo started (its request log counts the model calls made). */
  mock: boolean;
}

/**
 * The provider configured in `env`, or undefined when none is (the offline default). Half a
 * configuration is an error, not a silent fall back to the mock.
 */
export function configuredProvider(env: NodeJS.ProcessEnv): ModelConfig | undefined {
  const baseURL = nonEmpty(env[MODEL_ENV.baseURL]);
  const modelId = nonEmpty(env[MODEL_ENV.modelId]);
  if (baseURL === undefined && modelId === undefined) return undefined;
  if (baseURL === undefined || modelId === undefined) {
    const missing = baseURL === undefined ? MODEL_ENV.baseURL : MODEL_ENV.modelId;
    throw new CliError(`${missing} is not set`, `set both ${MODEL_ENV.baseURL} and ${MODEL_ENV.modelId} to use your model, or neither to use the mock`);
  }
  try {
    new URL(baseURL);
  } catch {
    throw new CliError(`${MODEL_ENV.baseURL} is not a URL: "${baseURL}"`, "for example https://api.openai.com/v1");
  }
  return { baseURL, modelId, apiKey: nonEmpty(env[MODEL_ENV.apiKey]), mock: false };
}

/** The variables a worker needs to reach the model. */
export function modelEnv(config: ModelConfig): Record<string, string | undefined> {
  return { [MODEL_ENV.baseURL]: config.baseURL, [MODEL_ENV.modelId]: config.modelId, [MODEL_ENV.apiKey]: config.apiKey };
}

/** The model a worker uses, from the variables the demo set. */
export function modelFromEnv(env: NodeJS.ProcessEnv): LanguageModelV3 {
  const config = configuredProvider(env);
  if (config === undefined) throw new Error(`the demo worker needs ${MODEL_ENV.baseURL} and ${MODEL_ENV.modelId}, which \`cairn demo\` sets`);
  return languageModel(config);
}

export function languageModel(config: ModelConfig): LanguageModelV3 {
  const provider = createOpenAICompatible({
    name: "demo",
    baseURL: config.baseURL,
    ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
  });
  return provider.chatModel(config.modelId);
}

/** `mock LLM at http://127.0.0.1:41234/v1` or `gpt-4o-mini at https://api.openai.com/v1`, for people. */
export function describeModel(config: ModelConfig): string {
  return config.mock ? `the mock LLM at ${config.baseURL}` : `${config.modelId} at ${config.baseURL}`;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}
