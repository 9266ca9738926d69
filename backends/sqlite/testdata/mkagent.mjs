// Made testdata/agentfs-0.4.db with agentfs-sdk 0.6.4 (npm), then
// sqlite3 agent.db "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE; VACUUM;"
//   node mkagent.mjs agent.db   (from a directory holding node_modules/agentfs-sdk)
import { AgentFS } from "agentfs-sdk";
const a = await AgentFS.open({ path: process.argv[2] });
await a.fs.mkdir("/d");
await a.fs.mkdir("/d/e");
await a.fs.writeFile("/d/hello.txt", "hello agentfs\n");
const big = Buffer.alloc(10000); for (let i=0;i<big.length;i++) big[i]=i%251;
await a.fs.writeFile("/d/e/big.bin", big);
await a.fs.writeFile("/empty", "");
await a.fs.symlink("d/hello.txt", "/link");
await a.close();
