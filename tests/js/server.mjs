// Starts `channel serve` on a free port for a test and stops it afterwards.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const CHANNEL = process.env.CHANNEL || path.resolve(here, "../../build/channel");

export async function startServer(args = []) {
  const proc = spawn(CHANNEL, ["serve", "--port", "0", "-t", "1", "--http-threads", "8", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start: " + stderr)), 30000);
    proc.stderr.on("data", (d) => {
      stderr += d;
      const m = /serving .* on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${stderr}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    proc,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill("SIGTERM");
      return await new Promise((resolve) => proc.on("exit", (code) => resolve(code)));
    },
  };
}

export const FACT = "Remember this: the access code of Vera Okafor is 48213.";
export const QUESTION = "What is the access code of Vera Okafor?";
