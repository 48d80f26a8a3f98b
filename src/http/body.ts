import type { IncomingMessage } from 'node:http';
import { errorCodes, type FastifyRequest } from 'fastify';
import { joinYielding } from '../event-loop/join-yielding.js';
import { invalidInput } from '../model/errors.js';

/**
 * Reads a request body into one Buffer without blocking the event loop for long, for the
 * content-type parser. Fastify's own reader (`parseAs: 'buffer'`) gathers the chunks and joins
 * them with one Buffer.concat when the body ends: for a 240 MiB Arrow body that one synchronous
 * copy into fresh memory held the event loop for about 250 ms. Here a body with a Content-Length
 * is copied into place chunk by chunk as it arrives, and a chunked one is joined a slice at a
 * time. What Fastify's reader checks is checked the same way, with its errors: the route's body
 * limit (from the Content-Length before anything is read, then as bytes arrive) and a body that
 * does not match its Content-Length.
 */
export function readBody(request: FastifyRequest, payload: IncomingMessage, done: (err: Error | null, body?: Buffer) => void): void {
  const limit = request.routeOptions.bodyLimit ?? 0;
  const declared = Number(request.headers['content-length'] ?? Number.NaN);
  const known = Number.isInteger(declared) && declared >= 0;
  if (known && declared > limit) {
    done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    return;
  }
  const whole = known ? Buffer.allocUnsafe(declared) : null;
  const chunks: Buffer[] = [];
  let received = 0;
  // Listeners as methods: a closure bound to a name would be renamed on every request where the
  // sources run through esbuild's keepNames (tsx), which costs more than the rest of this.
  const on = {
    stop(): void {
      payload.removeListener('data', on.data);
      payload.removeListener('end', on.end);
      payload.removeListener('error', on.end);
    },
    data(chunk: Buffer): void {
      if (received + chunk.length > limit) {
        on.stop();
        done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      if (whole) {
        if (received + chunk.length > whole.length) {
          on.stop();
          done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
          return;
        }
        chunk.copy(whole, received);
      } else {
        chunks.push(chunk);
      }
      received += chunk.length;
    },
    end(err?: Error & { statusCode?: number }): void {
      on.stop();
      if (err) {
        if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
        done(err);
        return;
      }
      if (whole) {
        if (received === whole.length) done(null, whole);
        else done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        return;
      }
      joinYielding(chunks, received).then(
        (body) => done(null, body),
        (e: Error) => done(e),
      );
    },
  };
  payload.on('data', on.data);
  payload.on('end', on.end);
  payload.on('error', on.end);
  payload.resume();
}

/** The JSON of a request body; an empty body or `null` is the empty request. Malformed JSON is a 400 code 13. */
export function parseJsonBody(raw: Buffer): unknown {
  const text = raw.toString('utf8').trim();
  if (text === '' || text === 'null') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw invalidInput(`the request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** The content-type parser of JSON routes: the body read as readBody reads it, then parsed (whatever the content type says). */
export function readJsonBody(request: FastifyRequest, payload: IncomingMessage, done: (err: Error | null, body?: unknown) => void): void {
  readBody(request, payload, (err, raw) => {
    if (err || raw === undefined) {
      done(err ?? null, raw);
      return;
    }
    let parsed: unknown;
    try {
      parsed = parseJsonBody(raw);
    } catch (e) {
      done(e as Error);
      return;
    }
    done(null, parsed);
  });
}
