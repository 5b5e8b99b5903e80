/**
 * The product's internals that the tools use, in one place. Everything else in tools/ reaches
 * Cairn through its public entry points (src/index.ts, src/ai/index.ts, src/testing/index.ts);
 * these are not public API, so a change to them shows up here, not across the tools.
 *
 * - The runtime and store behind a `Cairn` (src/internal.ts): the benchmarks and the experiment
 *   read the journal and drive executors directly.
 * - The SQLite WAL's write-out to its working size: the raw floors do what Cairn's store does.
 * - The line-marker channel: the experiment's workers report to their supervisor the way the
 *   demo's do.
 * - The CLI's argument parser, errors, table and styles: `npm run experiment` reads its options
 *   and prints its table and errors the way `cairn` does.
 */

export { runtimeOf, storeOf } from "../src/internal.js";
export { presizeWal } from "../src/store/sqlite/wal-presize.js";
export { markerChannel } from "../src/util/line-markers.js";
export { integerOption, parseArgs, positionals, stringOption, type OptionSpec, type ParsedArgs } from "../src/cli/args.js";
export { CliError, describeError } from "../src/cli/cli-error.js";
export { print, printJson, table } from "../src/cli/output.js";
export { bold, dim } from "../src/cli/style.js";
