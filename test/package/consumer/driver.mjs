// Runs app.mjs, SIGKILLs it inside the tool (after the first model call is recorded), runs it again
// and checks the run finished with exactly two model calls: the first was replayed, not repeated.
import { spawn, execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";

writeFileSync("calls.log", "");
const first = spawn(process.execPath, ["app.mjs", "first"], { stdio: ["ignore", "pipe", "inherit"] });
await new Promise((resolve, reject) => {
  first.stdout.on("data", (chunk) => {
    if (String(chunk).includes("tool-started")) resolve();
  });
  first.on("exit", (code) => reject(new Error(`app exited (${code}) before its tool started`)));
});
first.removeAllListeners("exit");
const exited = new Promise((resolve) => first.on("exit", (code, signal) => resolve(signal)));
first.kill("SIGKILL");
console.error(`consumer: first process ${await exited}`);
const out = JSON.parse(execFileSync(process.execPath, ["app.mjs", "resume"], { encoding: "utf8", timeout: 60_000 }).trim().split("\n").pop());
if (out.text !== "shipped order 7" || out.calls !== 2) {
  console.error("consumer: unexpected outcome", out);
  process.exit(1);
}
console.error(`consumer: the agent finished after SIGKILL with ${out.calls} model calls (none repeated): ${out.text}`);
