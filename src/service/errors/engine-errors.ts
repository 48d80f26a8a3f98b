import { EngineError } from '../../engine/lance-engine.js';
import { MergeTimedOut } from '../../engine/ports/rows.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import { InvalidKeyError, PreconditionFailedError, StoreUnavailableError } from '../../store/object-store.js';
import { type BranchName, onBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';

// The one translation of store and engine failures into the NamespaceError a client sees. Engine
// calls on a table map their failure where they are made (engineFailure, onEngine), naming the
// table; whatever reaches the HTTP layer unmapped goes through namespaceErrorOf there, once.

/** What an engine failure was about, for a message that names it. */
export interface EngineFailureContext {
  /** The version the request asked for: a missing version is then named as that version (the engine names a manifest path). */
  version?: number | undefined;
  /** The branch the request worked on (branch-refs.ts normalizeBranch); main when absent or null. */
  branch?: BranchName | undefined;
}

/**
 * What a client is told of an outage of the store the engine met: never the engine's message,
 * which names the endpoint, the bucket, paths and the engine's sources (the log has it, as the cause).
 */
function outageMessage(e: EngineError): string | undefined {
  if (e.kind === 'store_unreachable') return 'the store is unavailable; try again later';
  if (e.kind === 'store_full') return 'the store is full';
  return undefined;
}

/**
 * Maps an engine failure to the namespace error a client sees, keeping the engine's message (but
 * for an outage of the store: see outageMessage) and the failure as the cause. Anything that is
 * not an EngineError passes through unchanged.
 */
export function engineFailure(e: unknown, id: string[], about: EngineFailureContext = {}): unknown {
  if (!(e instanceof EngineError)) return e;
  const table = `table ${displayId(id)}`;
  const as = (code: ErrorCode, message = e.message) => new NamespaceError(code, message, { cause: e });
  // A merge that ran out of its time bound is unavailable rather than internal.
  if (e instanceof MergeTimedOut) return as(ErrorCode.ServiceUnavailable, `${table}: ${e.message}`);
  switch (e.kind) {
    case 'invalid_input':
      return invalidInput(e.message, e);
    case 'already_exists':
      return as(ErrorCode.TableAlreadyExists, `${table} already has data (another writer created it)`);
    case 'conflict':
      return as(ErrorCode.ConcurrentModification, `${table}: ${e.message}`);
    case 'not_a_dataset':
      return as(ErrorCode.InvalidTableState, `${table} has no readable Lance dataset: ${e.message}`);
    case 'version_not_found': {
      const branch = about.branch ?? null;
      if (about.version !== undefined) return as(ErrorCode.TableVersionNotFound, `${table} has no version ${about.version}${onBranch(branch)}`);
      // A branch whose every version was deleted (its ref stays): Lance names the missing directory.
      if (branch !== null) return as(ErrorCode.TableVersionNotFound, `${table} has no version${onBranch(branch)} (every version of it was deleted)`);
      return as(ErrorCode.TableVersionNotFound, `${table}: ${e.message}`);
    }
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
    case 'branch_not_found':
      return as(ErrorCode.TableBranchNotFound, `${table}: ${e.message}`);
    case 'branch_exists':
      return as(ErrorCode.TableBranchAlreadyExists, `${table}: ${e.message}`);
    case 'unsupported':
      return as(ErrorCode.Unsupported);
    case 'unavailable':
      return as(ErrorCode.ServiceUnavailable, `${table}: ${e.message}`);
    case 'store_unreachable':
    case 'store_full':
      return as(ErrorCode.ServiceUnavailable, `${table}: ${outageMessage(e)}`);
    default:
      return as(ErrorCode.Internal, `Lance engine error on ${table}: ${e.message}`);
  }
}

/** Runs engine work on the table `id`; its failure becomes the namespace error that names the table (engineFailure). */
export async function onEngine<T>(id: string[], work: () => Promise<T>, about: EngineFailureContext = {}): Promise<T> {
  try {
    return await work();
  } catch (e) {
    throw engineFailure(e, id, about);
  }
}

/**
 * The store errors a cause chain carries (the engine's outages too), outermost first: they decide
 * the answer of an otherwise internal failure.
 */
function storeCause(error: unknown): StoreUnavailableError | InvalidKeyError | EngineError | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof StoreUnavailableError || e instanceof InvalidKeyError) return e;
    if (e instanceof EngineError && outageMessage(e) !== undefined) return e;
  }
  return undefined;
}

/** Whether a failure comes from the store being unavailable (a StoreUnavailableError or an engine outage in its cause chain). */
export function isStoreOutage(error: unknown): boolean {
  const store = storeCause(error);
  return store !== undefined && !(store instanceof InvalidKeyError);
}

/**
 * The namespace error for a failure that reached the edge of the service unmapped: store errors
 * nobody caught, an engine failure without a table to name, or an internal NamespaceError whose
 * cause is the store's unavailability. Undefined for what is none of these (a framework error, a
 * bug): the caller decides. The original failure is always the cause, for the log.
 */
export function namespaceErrorOf(error: unknown): NamespaceError | undefined {
  const store = error instanceof NamespaceError && error.code !== ErrorCode.Internal ? undefined : storeCause(error);
  if (store instanceof InvalidKeyError) return new NamespaceError(ErrorCode.InvalidInput, store.message, { cause: error });
  if (store instanceof StoreUnavailableError)
    return new NamespaceError(ErrorCode.ServiceUnavailable, `the object store is unavailable: ${store.message}`, { cause: error });
  const outage = store === undefined ? undefined : outageMessage(store);
  if (outage !== undefined) return new NamespaceError(ErrorCode.ServiceUnavailable, outage, { cause: error });
  if (error instanceof NamespaceError) return error;
  if (error instanceof PreconditionFailedError)
    return new NamespaceError(ErrorCode.ConcurrentModification, `concurrent modification: ${error.message}`, { cause: error });
  if (error instanceof EngineError) return new NamespaceError(ErrorCode.Internal, `Lance engine error: ${error.message}`, { cause: error });
  return undefined;
}
