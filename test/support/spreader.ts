import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A client-side spreader for tests with several service replicas on one root: an HTTP proxy on a
// loopback port that sends each request to the next replica in turn (round robin), so that real
// clients (pylance, @lancedb/lancedb) pointed at it spread their requests too.
//
// When a replica dies, what the spreader does with a request depends on what the replica can have
// done with it:
// - The connection was refused: the request never reached a service, so it goes to the next
//   replica (a retry, safe for any request).
// - The connection broke after the request was sent: a read (describe, list, exists, a GET) is
//   sent to the next replica, as it changes nothing. A mutation may or may not have taken effect,
//   so it is not retried: the caller gets a 502 marked `x-spreader-outcome: in-doubt` and must
//   find out from the catalog what the request did.
// Every request opens its own connection (no keep-alive), so a refused connection always means a
// request that was not delivered.

export const IN_DOUBT_HEADER = 'x-spreader-outcome';

export interface SpreaderStats {
  requests: number;
  /** Requests answered by each slot. */
  answeredBy: number[];
  /** Sent again to another replica: after a refused connection, or a read after a broken one. */
  retriedRefused: number;
  retriedReads: number;
  /** Mutations whose replica died with them in flight, answered 502 in doubt (method and path). */
  inDoubt: string[];
  /** Requests that repeat an in-doubt one exactly (method, path, body): a client's own retry. */
  inDoubtResent: string[];
  /** Requests with no replica left to try. */
  unreachable: number;
}

export interface Spreader {
  url: string;
  stats: SpreaderStats;
  /** Points a slot at a replica (its base URL), or at nothing while it is down. */
  setSlot(slot: number, target: string | undefined): void;
  /** Requests sent to a slot's replica and not yet answered. */
  inFlight(slot: number): number;
  /** Resolves right after the next request has been written to `slot`'s replica. */
  nextSentTo(slot: number): Promise<void>;
  /** Sends the next request whose method and path match to `slot` first, out of turn. */
  pinNext(match: RegExp, slot: number): void;
  close(): Promise<void>;
}

/** Reads only: never retried as in doubt. Everything else that is a POST is a mutation. */
const READ_PATH = /\/(describe|list|exists|count_rows|query|stats|explain_plan|analyze_plan)$|\/version\/(list|describe)$|^\/v1\/table$/;

export function isRead(method: string, path: string): boolean {
  return method === 'GET' || method === 'HEAD' || READ_PATH.test(path.split('?')[0] ?? '');
}

type Attempt =
  | { kind: 'answered'; status: number; headers: http.IncomingHttpHeaders; body: Buffer }
  | { kind: 'refused' }
  | { kind: 'broken'; message: string };

export async function startSpreader(slots: number): Promise<Spreader> {
  const targets: Array<string | undefined> = Array.from({ length: slots }, () => undefined);
  const inFlight = Array.from({ length: slots }, () => 0);
  const stats: SpreaderStats = {
    requests: 0,
    answeredBy: inFlight.map(() => 0),
    retriedRefused: 0,
    retriedReads: 0,
    inDoubt: [],
    inDoubtResent: [],
    unreachable: 0,
  };
  const inDoubtKeys = new Set<string>();
  let sentWaiters: Array<{ slot: number; resolve: () => void }> = [];
  let turn = 0;
  let pinned: { match: RegExp; slot: number } | undefined;

  const attempt = (slot: number, target: string, req: http.IncomingMessage, body: Buffer): Promise<Attempt> =>
    new Promise((resolve) => {
      const headers = { ...req.headers, host: new URL(target).host, 'content-length': String(body.length) };
      delete headers['transfer-encoding'];
      delete headers.connection;
      const out = http.request(`${target}${req.url ?? '/'}`, { method: req.method, headers, agent: false });
      let connected = false;
      inFlight[slot] = (inFlight[slot] ?? 0) + 1;
      let settled = false;
      const settle = (a: Attempt) => {
        if (settled) return;
        settled = true;
        inFlight[slot] = (inFlight[slot] ?? 1) - 1;
        resolve(a);
      };
      out.on('socket', (socket) => socket.on('connect', () => (connected = true)));
      out.on('error', (e: NodeJS.ErrnoException) =>
        settle(!connected && e.code === 'ECONNREFUSED' ? { kind: 'refused' } : { kind: 'broken', message: e.message }),
      );
      out.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => settle({ kind: 'broken', message: e.message }));
        res.on('aborted', () => settle({ kind: 'broken', message: 'response aborted' }));
        res.on('end', () => settle({ kind: 'answered', status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      out.end(body, () => {
        const [ready, waiting] = [sentWaiters.filter((w) => w.slot === slot), sentWaiters.filter((w) => w.slot !== slot)];
        sentWaiters = waiting;
        for (const w of ready) w.resolve();
      });
    });

  const forward = async (req: http.IncomingMessage, body: Buffer): Promise<{ status: number; headers: http.OutgoingHttpHeaders; body: Buffer }> => {
    const read = isRead(req.method ?? 'GET', req.url ?? '/');
    const what = `${req.method ?? 'GET'} ${req.url ?? '/'}`;
    const key = createHash('sha256').update(what).update('\n').update(body).digest('hex');
    if (inDoubtKeys.has(key)) stats.inDoubtResent.push(what);
    let first = turn++ % slots;
    if (pinned?.match.test(what)) {
      first = pinned.slot;
      pinned = undefined;
    }
    // Every slot once, starting with this request's turn; a slot that is down is skipped.
    for (let i = 0; i < slots; i++) {
      const slot = (first + i) % slots;
      const target = targets[slot];
      if (!target) continue;
      const a = await attempt(slot, target, req, body);
      if (a.kind === 'answered') {
        stats.answeredBy[slot] = (stats.answeredBy[slot] ?? 0) + 1;
        const { connection: _c, 'transfer-encoding': _t, 'keep-alive': _k, ...headers } = a.headers;
        return { status: a.status, headers, body: a.body };
      }
      if (a.kind === 'refused') stats.retriedRefused++;
      else if (read) stats.retriedReads++;
      else {
        stats.inDoubt.push(what);
        inDoubtKeys.add(key);
        const error = { code: 18, error: `in doubt: the replica died with the request in flight (${a.message})`, type: 'InternalServerError', status: 502 };
        return { status: 502, headers: { 'content-type': 'application/json', [IN_DOUBT_HEADER]: 'in-doubt' }, body: Buffer.from(JSON.stringify(error)) };
      }
    }
    stats.unreachable++;
    return {
      status: 503,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ code: 18, error: 'no replica reachable', status: 503 })),
    };
  };

  const server = http.createServer((req, res) => {
    stats.requests++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      forward(req, Buffer.concat(chunks)).then(
        (answer) => {
          res.writeHead(answer.status, { ...answer.headers, 'content-length': String(answer.body.length) });
          res.end(answer.body);
        },
        (e: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(`spreader failure: ${String(e)}`);
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    setSlot(slot, target) {
      targets[slot] = target;
    },
    inFlight: (slot) => inFlight[slot] ?? 0,
    nextSentTo: (slot) => new Promise((resolve) => sentWaiters.push({ slot, resolve })),
    pinNext(match, slot) {
      pinned = { match, slot };
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
