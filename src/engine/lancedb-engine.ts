import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { arrow } from './arrow.js';
import { schemaToJson, type JsonArrowSchema } from './json-arrow-schema.js';
import { type CreateDatasetMode, type DatasetLocation, EngineError, type LanceEngine } from './lance-engine.js';

type LancedbModule = typeof import('@lancedb/lancedb');
type Connection = import('@lancedb/lancedb').Connection;
type Table = import('@lancedb/lancedb').Table;

const require = createRequire(import.meta.url);

// @lancedb/lancedb opens tables only by name under a connection, never by an arbitrary location.
// Its REST namespace client, though, opens whatever location a namespace's `describe` (or
// `declare`) answers. So the adapter runs a private resolver on 127.0.0.1: each operation
// registers a one-off handle for its location, opens the handle through the client, and drops it.
// The resolver answers only those two calls, and only for live handles.

function classify(e: unknown, fallback: EngineError['kind'] = 'internal'): EngineError {
  if (e instanceof EngineError) return e;
  const message = e instanceof Error ? e.message : String(e);
  let kind = fallback;
  if (/already exists/i.test(message)) kind = 'already_exists';
  else if (/commit conflict|preempted|concurrent/i.test(message)) kind = 'conflict';
  else if (/not found|does not exist|no such file|Dataset at path .* was not found/i.test(message)) kind = 'not_a_dataset';
  return new EngineError(kind, message, { cause: e });
}

export class LancedbEngine implements LanceEngine {
  private constructor(
    private readonly resolver: http.Server,
    private readonly connection: Connection,
    /** Live handles; the resolver reads the same map. */
    private readonly handles: Map<string, DatasetLocation>,
  ) {}

  static async start(): Promise<LancedbEngine> {
    const handles = new Map<string, DatasetLocation>();
    const resolver = http.createServer((req, res) => LancedbEngine.resolve(handles, req, res));
    await new Promise<void>((resolve, reject) => {
      resolver.once('error', reject);
      resolver.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (resolver.address() as AddressInfo).port;
    const lancedb = require('@lancedb/lancedb') as LancedbModule;
    const connection = await lancedb.connectNamespace('rest', { uri: `http://127.0.0.1:${port}` });
    return new LancedbEngine(resolver, connection, handles);
  }

  private static resolve(handles: Map<string, DatasetLocation>, req: http.IncomingMessage, res: http.ServerResponse): void {
    req.resume();
    req.on('end', () => {
      const match = /^\/v1\/table\/([^/?]+)\/(describe|declare)(\?|$)/.exec(req.url ?? '');
      const handle = match ? handles.get(decodeURIComponent(match[1] ?? '')) : undefined;
      res.setHeader('content-type', 'application/json');
      if (req.method !== 'POST' || !handle) {
        res.statusCode = 404;
        res.end(JSON.stringify({ code: 4, error: 'unknown engine handle' }));
        return;
      }
      res.end(JSON.stringify({ location: handle.location, storage_options: handle.storageOptions, managed_versioning: false }));
    });
  }

  private async withHandle<T>(at: DatasetLocation, fn: (handle: string) => Promise<T>): Promise<T> {
    const handle = `h${randomBytes(8).toString('hex')}`;
    this.handles.set(handle, at);
    try {
      return await fn(handle);
    } finally {
      this.handles.delete(handle);
    }
  }

  private async open(handle: string): Promise<Table> {
    try {
      return await this.connection.openTable(handle);
    } catch (e) {
      throw classify(e, 'not_a_dataset');
    }
  }

  async createDataset(at: DatasetLocation, arrowIpcStream: Buffer, mode: CreateDatasetMode): Promise<{ version: number }> {
    if (arrowIpcStream.length === 0) {
      throw new EngineError('invalid_input', 'the request body must be an Arrow IPC stream (it is required and was empty)');
    }
    let data: import('apache-arrow').Table;
    try {
      data = arrow.tableFromIPC(arrowIpcStream);
    } catch (e) {
      throw new EngineError('invalid_input', `the request body is not a valid Arrow IPC stream: ${(e as Error).message}`, { cause: e });
    }
    if (data.schema.fields.length === 0) throw new EngineError('invalid_input', 'the Arrow IPC stream has no columns');
    return this.withHandle(at, async (handle) => {
      try {
        if (mode === 'overwrite') {
          const existing = await this.connection.openTable(handle).catch(() => null);
          if (existing) {
            try {
              await existing.add(data, { mode: 'overwrite' });
              return { version: await existing.version() };
            } finally {
              existing.close();
            }
          }
        }
        const table =
          data.numRows === 0
            ? await this.connection.createEmptyTable(handle, data.schema)
            : await this.connection.createTable(handle, data);
        try {
          return { version: await table.version() };
        } finally {
          table.close();
        }
      } catch (e) {
        throw classify(e);
      }
    });
  }

  async datasetVersion(at: DatasetLocation): Promise<number> {
    return this.withHandle(at, async (handle) => {
      const table = await this.open(handle);
      try {
        return await table.version();
      } catch (e) {
        throw classify(e, 'not_a_dataset');
      } finally {
        table.close();
      }
    });
  }

  async describeDataset(at: DatasetLocation, version?: number): Promise<{ version: number; schema: JsonArrowSchema }> {
    return this.withHandle(at, async (handle) => {
      const table = await this.open(handle);
      try {
        if (version !== undefined) await table.checkout(version);
        return { version: await table.version(), schema: schemaToJson(await table.schema()) };
      } catch (e) {
        const failure = classify(e, 'internal');
        if (version !== undefined && failure.kind === 'not_a_dataset') throw new EngineError('version_not_found', failure.message, { cause: e });
        throw failure;
      } finally {
        table.close();
      }
    });
  }

  async close(): Promise<void> {
    this.connection.close();
    // The client keeps its connections to the resolver alive; close them rather than wait them out.
    const closed = new Promise<void>((resolve) => this.resolver.close(() => resolve()));
    this.resolver.closeAllConnections();
    await closed;
  }
}
