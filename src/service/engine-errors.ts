import { EngineError } from '../engine/lance-engine.js';
import { ErrorCode, invalidInput, NamespaceError } from '../model/errors.js';
import { displayId } from './catalog/catalog.js';

/**
 * Maps an engine failure to the namespace error a client sees, keeping the engine's message and
 * the failure as the cause. Anything that is not an EngineError passes through unchanged.
 */
export function engineFailure(e: unknown, id: string[]): unknown {
  if (!(e instanceof EngineError)) return e;
  const table = `table ${displayId(id)}`;
  const as = (code: ErrorCode, message = e.message) => new NamespaceError(code, message, { cause: e });
  switch (e.kind) {
    case 'invalid_input':
      return invalidInput(e.message, e);
    case 'already_exists':
      return as(ErrorCode.TableAlreadyExists, `${table} already has data (another writer created it)`);
    case 'conflict':
      return as(ErrorCode.ConcurrentModification, `${table}: ${e.message}`);
    case 'not_a_dataset':
      return as(ErrorCode.InvalidTableState, `${table} has no readable Lance dataset: ${e.message}`);
    case 'version_not_found':
      return as(ErrorCode.TableVersionNotFound, `${table}: ${e.message}`);
    case 'column_not_found':
      return as(ErrorCode.TableColumnNotFound, `${table}: ${e.message}`);
    case 'index_not_found':
      return as(ErrorCode.TableIndexNotFound, `${table}: ${e.message}`);
    case 'index_exists':
      return as(ErrorCode.TableIndexAlreadyExists, `${table}: ${e.message}`);
    case 'tag_not_found':
      return as(ErrorCode.TableTagNotFound, `${table}: ${e.message}`);
    case 'tag_exists':
      return as(ErrorCode.TableTagAlreadyExists, `${table}: ${e.message}`);
    case 'unsupported':
      return as(ErrorCode.Unsupported);
    case 'unavailable':
      return as(ErrorCode.ServiceUnavailable, `${table}: the storage is unavailable: ${e.message}`);
    default:
      return as(ErrorCode.Internal, `Lance engine error on ${table}: ${e.message}`);
  }
}
