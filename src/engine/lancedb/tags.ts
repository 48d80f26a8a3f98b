import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type { TagOps } from '../ports/tags.js';
import { engineMessage } from './rows.js';
import { classify, type Table, type TableAccess } from './table-access.js';

type Tags = Awaited<ReturnType<Table['tags']>>;

/** Classifies a failure of a tag operation by Lance's ref error kinds. */
function tagFailure(e: unknown): EngineError {
  if (e instanceof EngineError) return e;
  const raw = e instanceof Error ? e.message : String(e);
  const message = engineMessage(e);
  if (/Ref conflict/i.test(raw)) return new EngineError('tag_exists', message, { cause: e });
  if (/Ref not found/i.test(raw)) return new EngineError('tag_not_found', message, { cause: e });
  if (/Version not found/i.test(raw)) return new EngineError('version_not_found', message, { cause: e });
  if (/Ref is invalid|Invalid input/i.test(raw)) return new EngineError('invalid_input', message, { cause: e });
  return new EngineError(classify(e).kind, message, { cause: e });
}

/** The tags operations of the Lance engine over @lancedb/lancedb. */
export class LancedbTags implements TagOps {
  constructor(private readonly access: TableAccess) {}

  private withTags<T>(at: DatasetLocation, kind: 'read' | 'write', fn: (tags: Tags) => Promise<T>): Promise<T> {
    return this.access[kind](at, async (table) => {
      try {
        return await fn(await table.tags());
      } catch (e) {
        throw tagFailure(e);
      }
    });
  }

  create(at: DatasetLocation, tag: string, version: number): Promise<void> {
    return this.withTags(at, 'write', (tags) => tags.create(tag, version));
  }

  update(at: DatasetLocation, tag: string, version: number): Promise<void> {
    return this.withTags(at, 'write', (tags) => tags.update(tag, version));
  }

  delete(at: DatasetLocation, tag: string): Promise<void> {
    return this.withTags(at, 'write', (tags) => tags.delete(tag));
  }
}
