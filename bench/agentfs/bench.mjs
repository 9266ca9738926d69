// Replays a capfs bench trace (bench.WriteTrace) on an AgentFS database through
// the agentfs-sdk npm package and prints each phase's milliseconds as a JSON
// array. Run by bench/cmd/benchtable from a cache directory holding
// node_modules/agentfs-sdk (0.6.4).
//
//   node bench.mjs TRACE.json AGENT.db
import { readFileSync } from "node:fs";
import { AgentFS } from "agentfs-sdk";

const [trace, db] = process.argv.slice(2);
const phases = JSON.parse(readFileSync(trace, "utf8"));
const agent = await AgentFS.open({ path: db });
const fs = agent.fs;
const data = Buffer.alloc(1 << 20);
for (let i = 0; i < data.length; i++) data[i] = (i * 31 + 7) & 0xff;
const abs = (p) => "/" + p;

async function rmall(p) {
  await fs.rm(abs(p), { recursive: true, force: false });
}

const out = [];
for (const ph of phases) {
  const start = process.hrtime.bigint();
  for (const op of ph.ops) {
    const p = abs(op.p);
    switch (op.k) {
      case "mkdir": await fs.mkdir(p); break;
      case "write": await fs.writeFile(p, data.subarray(0, op.n || 0)); break;
      case "create": await fs.writeFile(p, Buffer.alloc(0)); break;
      case "read": {
        const b = await fs.readFile(p);
        if (b.length === 0) throw new Error("read " + p + ": empty");
        break;
      }
      case "stat": await fs.stat(p); break;
      case "lookup":
        try { await fs.stat(p); } catch (e) { if (e.code !== "ENOENT") throw e; }
        break;
      case "readdir": await fs.readdir(p); break;
      case "rename": await fs.rename(p, abs(op.q)); break;
      case "rmall": await rmall(op.p); break;
      case "openclose": { const h = await fs.open(p); await h.fstat(); break; }
      case "trunc": { const h = await fs.open(p); await h.truncate(op.n || 0); break; }
      default: throw new Error("unknown op " + op.k);
    }
  }
  out.push(Number(process.hrtime.bigint() - start) / 1e6);
}
await agent.close();
console.log(JSON.stringify(out));
