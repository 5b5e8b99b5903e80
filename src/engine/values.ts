/**
 * The journal's values moved to the store layer (src/store/value/): this re-export serves the files
 * another branch of issue 9 moves out of src/engine (cairn.ts, executor.ts, run-handle.ts); point
 * them at "../store/value/index.js" and delete this file once the branches are merged.
 */
export { errorFromText, errorText, fromStored, storableThrown, toStored } from "../store/value/index.js";
