// A process that claims one slot key over and over against a shared local root, as version-slot
// writers do: create-if-absent (not durable), check what the key holds while it holds it, delete
// keeping the directory. Three workers in the process do so at once, and between claims of the
// shared key each claims a key of its own, so that the process's spare files move from key to key
// while others are held. Prints a JSON line: the process's wins and every violation seen.
//
// Usage: node --import tsx slot-claimer.ts <root> <dir key> <claims> <start file>
//        node --import tsx slot-claimer.ts <root> <dir key> read <start file>
// The second form reads the shared key until `<start file>.stop` exists, as a reader in another
// process would (a drop, a waiting writer), and reports every read whose etag the key still shows
// after the read while its bytes are not what a holder wrote: a reader may act on what it read
// with that etag (a takeover is a replace-if-unchanged from it). A read that met a file its key let
// go of may be torn, but then the key no longer shows its etag.

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { PreconditionFailedError } from '../../src/store/object-store.js';

const [root, dir, claimsText, startFile] = process.argv.slice(2) as [string, string, string, string];
const store = new LocalObjectStore(root);
const shared = `${dir}slot.json`;
const violations: string[] = [];
let wins = 0;

/** A body of varying length, so that a rewrite in place of a longer one must truncate it. */
const token = () => JSON.stringify({ holder: process.pid, nonce: randomBytes(1 + Math.floor(Math.random() * 40)).toString('hex') });

async function holdOnce(key: string): Promise<boolean> {
  const body = token();
  try {
    await store.put(key, body, { ifNoneMatch: '*' }, { durable: false, shortLived: true });
  } catch (e) {
    if (e instanceof PreconditionFailedError) return false;
    throw e;
  }
  // While held, the key shows exactly this holder's body: nobody wrote over it in place.
  for (let i = 0; i < 3; i++) {
    const seen = (await store.get(key))?.body.toString('utf8');
    if (seen !== body) violations.push(`${key} held with ${body} showed ${seen}`);
    await new Promise((r) => setImmediate(r));
  }
  await store.delete(key, { keepDirectory: true });
  return true;
}

while (!existsSync(startFile)) await new Promise((r) => setTimeout(r, 5));
if (claimsText === 'read') {
  let reads = 0;
  while (!existsSync(`${startFile}.stop`)) {
    const read = await store.get(shared);
    if (read) {
      reads++;
      const body = read.body.toString('utf8');
      const now = await store.head(shared);
      if (now?.etag === read.etag && !/^\{"holder":\d+,"nonce":"[0-9a-f]*"\}$/.test(body))
        violations.push(`${read.etag}, still shown, came with ${JSON.stringify(body)}`);
    }
    if (reads % 64 === 0) await new Promise((r) => setImmediate(r));
  }
  process.stdout.write(`${JSON.stringify({ wins: reads, violations })}\n`);
  process.exit(0);
}
const claims = Number(claimsText);
const worker = async (n: number) => {
  const own = `${dir}own-${process.pid}-${n}.json`;
  while (wins < claims) {
    if (await holdOnce(shared)) wins++;
    await holdOnce(own);
    await new Promise((r) => setTimeout(r, Math.random() * 3));
  }
};
await Promise.all([0, 1, 2].map(worker));
await store.close();
process.stdout.write(`${JSON.stringify({ wins, violations })}\n`);
