import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { type CarelessS3, startCarelessS3 } from '../support/careless-s3.js';

// A store that stops honouring conditional writes while the service runs: the
// next scheduled check logs an error and /health/ready answers 503 from then on, naming no
// internals. (At start-up such a store stops the service: test/process/main.test.ts.)

type LogLine = Record<string, unknown> & { level: number; msg: string };

describe('/health/ready when a later store check finds conditions ignored', () => {
  let s3: CarelessS3;
  let app: App;
  const lines: LogLine[] = [];
  const waiters: Array<{ match: (l: LogLine) => boolean; resolve: () => void }> = [];
  const logged = (match: (l: LogLine) => boolean) => new Promise<void>((resolve) => (lines.some(match) ? resolve() : waiters.push({ match, resolve })));
  beforeAll(async () => {
    s3 = await startCarelessS3();
    s3.careless = false;
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const text of chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== '')) {
          const line = JSON.parse(text) as LogLine;
          lines.push(line);
          for (const w of waiters.filter((w) => w.match(line))) w.resolve();
        }
        callback();
      },
    });
    const config = loadConfig(
      [
        '--root',
        `s3://${s3.bucket}/cat`,
        '--s3-endpoint',
        s3.endpoint,
        '--s3-access-key-id',
        'k',
        '--s3-secret-access-key',
        's',
        '--store-check-interval-ms',
        '20',
        '--log-level',
        'info',
      ],
      {},
    );
    app = await createApp(config, pino({ level: 'info' }, sink));
  });
  afterAll(async () => {
    await app?.close();
    await s3?.close();
  });

  it('is ready while the store honours them, and 503 for good once a check finds them ignored', async () => {
    expect((await app.server.inject({ method: 'GET', url: '/health/ready' })).statusCode).toBe(200);
    s3.careless = true;
    await logged((l) => l.level === 50 && /does not honour conditional writes/.test(l.msg));
    const ready = await app.server.inject({ method: 'GET', url: '/health/ready' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ code: 17 });
    expect(ready.body).toContain('the store does not honour conditional writes');
    expect(ready.body).not.toContain(s3.endpoint);
    // Honest again, it stays not ready: acknowledged writes may have been lost meanwhile.
    s3.careless = false;
    await logged((l) => l.level === 50 && /honours conditional writes again/.test(l.msg));
    expect((await app.server.inject({ method: 'GET', url: '/health/ready' })).statusCode).toBe(503);
  });
});
