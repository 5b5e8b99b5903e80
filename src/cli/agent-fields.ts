/** Money and tokens as the CLI prints them (the numbers come from src/observe/). */

/** US dollars to two significant digits, never in exponent form: `$0.0000072`, `$0.50`, `$12.30`. */
export function formatUsd(usd: number): string {
  if (!Number.isFinite(usd) || usd <= 0) return "$0";
  const decimals = Math.min(10, Math.max(2, 1 - Math.floor(Math.log10(usd))));
  return `$${usd.toFixed(decimals)}`;
}

/** `27 tokens (20 in, 7 out)`. */
export function formatUsage(inputTokens: number, outputTokens: number, totalTokens: number): string {
  return `${totalTokens} tokens (${inputTokens} in, ${outputTokens} out)`;
}
