/** Dollars per million tokens, for the `usd` budget and the cost columns. */
export interface Pricing {
  inputPerMillion: number;
  outputPerMillion: number;
}

export function costUsd(pricing: Pricing | undefined, inputTokens: number, outputTokens: number): number {
  if (pricing === undefined) return 0;
  return (inputTokens * pricing.inputPerMillion + outputTokens * pricing.outputPerMillion) / 1_000_000;
}
