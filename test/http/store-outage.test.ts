import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { startTestApp, type TestApp, tally } from '../support/app.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { s3Backends, type TestRoot } from '../support/backends.js';
import { FailingDisk } from '../support/failing-disk.js';
import { expectSpecBody } from '../support/spec-body.js';
import { TcpProxy } from '../support/tcp-proxy.js';

// With the store gone under writers, every answer is a success or the
// spec's 503 code 17, and no body names the endpoint, the bucket, the root or the engine's
// sources (with radosgw killed, a CreateTable got 500 with all of these); nothing acknowledged is
// lost once the store is back. On S3 the store is taken away by cutting a proxy between the
// service and radosgw, so that the run's radosgw stays up for every other test. On a local root
// "unreachable" is a disk that fails under the root (EIO, then EROFS as ext4 remounts read-only
// after I/O errors; a dead network mount answers ENOTCONN, ESTALE or ETIMEDOUT, a full one ENOSPC):
// a loop-mounted ext4 whose device loses its data.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const WRITERS = 4;
/** Rows per write: enough that a write spends its time in the engine, where the outage must meet it too. */
const ROWS = 2_000;
const MANAGED = `?properties=${encodeURIComponent(JSON.stringify({ managed_versioning: 'true' }))}`;

interface Answer {
  writer: number;
  phase: Phase;
  /** Which outage (the store is taken away and brought back once per cycle). */
  cycle: number;
  op: 'create' | 'insert';
  status: number;
  json: Record<string, unknown>;
  text: string;
}

type Phase = 'up' | 'cut' | 'restored';

/** Writers that create tables and insert into them, each one request after another, recording every answer and what was acknowledged. */
class Writers {
  readonly answers: Answer[] = [];
  /** Ids acknowledged per table name. */
  readonly acknowledged = new Map<string, number[]>();
  phase: Phase = 'up';
  cycle = 0;
  private stopped = false;
  private readonly waiting = new Set<() => void>();
  private readonly running: Promise<void>[];

  constructor(private readonly t: TestApp) {
    this.running = Array.from({ length: WRITERS }, (_, w) => this.write(w));
  }

  /** Resolves once every writer has `count` answers in `phase` of this cycle that satisfy `which`. */
  each(count: number, phase: Phase, which: (a: Answer) => boolean = () => true): Promise<void> {
    const { cycle } = this;
    const done = () =>
      Array.from({ length: WRITERS }, (_, w) => this.answers.filter((a) => a.writer === w && a.phase === phase && a.cycle === cycle && which(a)).length).every(
        (n) => n >= count,
      );
    return new Promise((resolve) => {
      const check = () => {
        if (!done()) return;
        this.waiting.delete(check);
        resolve();
      };
      this.waiting.add(check);
      check();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }

  private async write(w: number): Promise<void> {
    let table: string | null = null;
    let next = w * 10_000_000;
    for (let i = 0; !this.stopped; i++) {
      const ids = Array.from({ length: ROWS }, () => next++);
      const { phase, cycle } = this;
      const op = table === null || i % 3 === 0 ? 'create' : 'insert';
      const name: string = op === 'create' ? `w${w}_${i}` : (table ?? '');
      // Half the writers' tables have managed versioning: the engine then commits through the service's commit path.
      const query = op === 'create' && w % 2 === 1 ? MANAGED : '';
      const res = await this.t.call('POST', `/v1/table/ns%24${name}/${op}${query}`, peopleStream(ids), ARROW);
      if (res.status === 200) {
        if (op === 'create') table = name;
        this.acknowledged.set(name, [...(this.acknowledged.get(name) ?? []), ...ids]);
      }
      this.answers.push({ writer: w, phase, cycle, op, status: res.status, json: res.json, text: res.text });
      for (const check of [...this.waiting]) check();
    }
  }
}

const succeeded = (a: Answer): boolean => a.status === 200;
/** A 503 the engine's failure made (the service's own store calls say "the object store is unavailable"). */
const engineOutage = (a: Answer): boolean => a.status === 503 && /^table \[.*\]: the store is unavailable/.test(String(a.json.error));

/** How many answers of each phase and status, and how many 503s came from the engine. */
function answerCounts(answers: Answer[]): string {
  const counts = tally(answers.map((a) => `${a.phase} ${a.status}`));
  return `${JSON.stringify(counts)}, ${answers.filter(engineOutage).length} of the 503s from the engine`;
}

/** Every answer is a success or a 503 code 17 whose body names nothing of the store. */
function expectOnlySuccessOrUnavailable(answers: Answer[], internals: string[]): void {
  for (const a of answers) {
    if (a.status === 200) continue;
    expect(a.status, `${a.op} while ${a.phase}: ${a.text}`).toBe(503);
    expectSpecBody(a.json, 503, 17);
    for (const internal of internals) expect(a.text, a.text).not.toContain(internal);
    expect(a.text).not.toMatch(/\.rs\b|cargo|LanceError|os error|127\.0\.0\.1|Caused by/);
  }
}

/** Every acknowledged row is in its table, read straight from the store. */
async function expectNothingAcknowledgedLost(root: TestRoot, writers: Writers): Promise<void> {
  const options = root.store.engineStorageOptions();
  for (const [name, ids] of writers.acknowledged) {
    const present = new Set((await readRows(root.store.location(`ns/${name}.lance`), options)).map((r) => Number(r.id)));
    expect(
      ids.filter((id) => !present.has(id)),
      name,
    ).toEqual([]);
  }
}

const rgw = s3Backends().find((b) => b.name === 'rgw');

describe.skipIf(!rgw)('radosgw cut off under 4 writers', () => {
  let root: TestRoot;
  let proxy: TcpProxy;
  let t: TestApp;
  let internals: string[];
  beforeAll(async () => {
    root = await (rgw?.newRoot() ?? Promise.reject(new Error('no radosgw')));
    proxy = await TcpProxy.start(root.s3.endpoint ?? '');
    t = await startTestApp({ ...root, s3: { ...root.s3, endpoint: proxy.endpoint } });
    expect((await t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    const bucket = /^s3:\/\/([^/]+)\/(.+)$/.exec(root.root) ?? [];
    internals = [proxy.endpoint, root.s3.endpoint ?? '', proxy.endpoint.replace('http://', ''), root.root, ...bucket.slice(1)];
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
    await root?.dispose();
  });

  it('answers 200 or 503 code 17 without internals, and loses nothing acknowledged', { timeout: 600_000 }, async () => {
    const writers = new Writers(t);
    await writers.each(2, 'up', succeeded);
    // Cut, and bring back, until an outage has met the engine at work (the first nearly always does).
    for (let cycle = 0; cycle < 5 && !writers.answers.some(engineOutage); cycle++) {
      writers.cycle = cycle;
      writers.phase = 'cut';
      await proxy.cut();
      await writers.each(2, 'cut');
      writers.phase = 'restored';
      await proxy.restore();
      await writers.each(2, 'restored', succeeded);
    }
    await writers.stop();
    console.log(`radosgw cut under ${WRITERS} writers: ${answerCounts(writers.answers)}`);
    expectOnlySuccessOrUnavailable(writers.answers, internals);
    expect(writers.answers.some(engineOutage)).toBe(true);
    await expectNothingAcknowledgedLost(root, writers);
  });

  it('answers /health/ready with 503 and no internals while the store is gone', async () => {
    expect((await t.call('GET', '/health/ready')).status).toBe(200);
    await proxy.cut();
    try {
      const res = await t.call('GET', '/health/ready');
      expect(res.status).toBe(503);
      expectSpecBody(res.json, 503, 17);
      expect(res.json.error).toBe('store unreachable: the root cannot be written and read back');
    } finally {
      await proxy.restore();
    }
    expect((await t.call('GET', '/health/ready')).status).toBe(200);
  });
});

describe('a local root on a disk that fails under 4 writers', () => {
  let disk: FailingDisk | { skipped: string } = { skipped: 'not made yet' };
  let root: TestRoot;
  let t: TestApp;
  beforeAll(async () => {
    disk = FailingDisk.create();
    if (!(disk instanceof FailingDisk)) return;
    const dir = path.join(disk.mountPoint, 'root');
    mkdirSync(dir);
    root = { root: dir, s3: { region: 'us-east-1', forcePathStyle: true }, store: new LocalObjectStore(dir), dispose: async () => undefined };
    t = await startTestApp(root);
    expect((await t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  });
  afterAll(async () => {
    try {
      await t?.close();
    } finally {
      if (disk instanceof FailingDisk) disk.dispose();
    }
  });

  it('answers 200 or 503 code 17 without paths, health included', { timeout: 300_000 }, async (ctx) => {
    if (!(disk instanceof FailingDisk)) {
      console.log(`failing-disk tier skipped: ${disk.skipped}`);
      ctx.skip();
      return;
    }
    const writers = new Writers(t);
    await writers.each(2, 'up', succeeded);
    writers.phase = 'cut';
    disk.fail();
    await writers.each(3, 'cut');
    await writers.stop();
    const ready = await t.call('GET', '/health/ready');
    console.log(`disk failed under ${WRITERS} writers: ${answerCounts(writers.answers)}; health ${ready.status} ${ready.text}`);
    expectOnlySuccessOrUnavailable(writers.answers, [disk.mountPoint, disk.mountPoint.slice(1)]);
    expect(writers.answers.filter((a) => a.phase === 'cut' && a.status === 503).length).toBeGreaterThan(0);
    expect(ready.status).toBe(503);
    expectSpecBody(ready.json, 503, 17);
    expect(ready.json.error).toBe('store unreachable: the root cannot be written and read back');
  });
});
