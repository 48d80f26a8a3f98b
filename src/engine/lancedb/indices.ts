import { arrow } from '../arrow.js';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type { EngineIndexType, IndexDescription, IndexOps, IndexSpec } from '../ports/indices.js';
import type { PylanceIndexBuilder } from '../pylance/pylance-indices.js';
import { classifyDataError } from './queries.js';
import { lancedb, type Table, type TableAccess } from './table-access.js';

type Index = import('@lancedb/lancedb').Index;
type BaseTokenizer = import('@lancedb/lancedb').FtsOptions['baseTokenizer'];

/** The types @lancedb/lancedb 0.39 can build; the others (IVF_SQ, IVF_HNSW_FLAT, NGRAM, ZONEMAP, BLOOMFILTER, RTREE) have no builder in the binding: pylance builds them. */
const BUILDABLE: readonly EngineIndexType[] = ['IVF_PQ', 'IVF_FLAT', 'IVF_RQ', 'IVF_HNSW_SQ', 'IVF_HNSW_PQ', 'BTREE', 'BITMAP', 'LABEL_LIST', 'FTS'];

/**
 * The stemming / stop-word languages of Lance's tokenizer. The binding parses the language with an
 * unwrap, so any other value aborts the whole process: it must never reach it.
 */
const FTS_LANGUAGES = [
  'Arabic',
  'Danish',
  'Dutch',
  'English',
  'Finnish',
  'French',
  'German',
  'Greek',
  'Hungarian',
  'Italian',
  'Norwegian',
  'Portuguese',
  'Romanian',
  'Russian',
  'Spanish',
  'Swedish',
  'Tamil',
  'Turkish',
] as const;

const typeKey = (v: string): string => v.replace(/[_\- ]/g, '').toLowerCase();

/** listIndices spells types IvfPq, BTree, LabelList, FTS/Inverted...; the spec's friendly names are IVF_PQ, BTREE... */
const FRIENDLY_TYPE = new Map<string, string>([
  ...(
    [
      'IVF_PQ',
      'IVF_FLAT',
      'IVF_SQ',
      'IVF_RQ',
      'IVF_HNSW_FLAT',
      'IVF_HNSW_SQ',
      'IVF_HNSW_PQ',
      'BTREE',
      'BITMAP',
      'LABEL_LIST',
      'FTS',
      'NGRAM',
      'ZONEMAP',
      'BLOOMFILTER',
      'RTREE',
    ] as const
  ).map((t) => [typeKey(t), t] as const),
  ['inverted', 'FTS'],
]);

const friendlyType = (engineType: string): string => FRIENDLY_TYPE.get(typeKey(engineType)) ?? engineType.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();

function ftsLanguage(language: string | undefined): string | undefined {
  if (language === undefined) return undefined;
  const found = FTS_LANGUAGES.find((l) => l.toLowerCase() === language.toLowerCase());
  if (found === undefined) throw new EngineError('invalid_input', `unknown FTS language ${JSON.stringify(language)}; one of ${FTS_LANGUAGES.join(', ')}`);
  return found;
}

/** The element type of a (multi)vector column: the innermost child of its list types. */
function vectorElementType(type: import('apache-arrow').DataType): import('apache-arrow').DataType {
  let t = type;
  while ((arrow.DataType.isFixedSizeList(t) || arrow.DataType.isList(t)) && t.children[0] !== undefined) t = t.children[0].type;
  return t;
}

/**
 * Hamming distance needs binary vectors (uint8); on float vectors IVF training panics inside the
 * engine. Checked for top-level columns (nested paths are left to the engine).
 */
async function checkHamming(table: Table, spec: IndexSpec): Promise<void> {
  if (spec.distanceType !== 'hamming') return;
  if (spec.type !== 'IVF_FLAT') throw new EngineError('invalid_input', `hamming distance is supported by IVF_FLAT indexes only, not ${spec.type}`);
  const field = (await table.schema()).fields.find((f) => f.name === spec.column);
  if (field === undefined) return;
  const element = vectorElementType(field.type);
  if (!(arrow.DataType.isInt(element) && element.bitWidth === 8 && !element.isSigned)) {
    throw new EngineError('invalid_input', `hamming distance needs a binary (uint8) vector column; ${spec.column} holds ${String(element)}`);
  }
}

/** num_partitions, or the one target_partition_size implies (Lance's rule: rows / target, at least 1). */
async function numPartitions(table: Table, spec: IndexSpec): Promise<number | undefined> {
  const { numPartitions: given, targetPartitionSize: target } = spec.vector;
  if (given !== undefined || target === undefined) return given;
  return Math.max(1, Math.ceil((await table.countRows()) / target));
}

/** The binding's index config for the spec. */
async function indexConfig(table: Table, spec: IndexSpec): Promise<Index> {
  const { Index } = lancedb();
  const v = spec.vector;
  if (!BUILDABLE.includes(spec.type)) throw new EngineError('unsupported', `@lancedb/lancedb does not build ${spec.type} indexes`);
  await checkHamming(table, spec);
  // hamming is refused above for every type but IVF_FLAT, so the others get l2/cosine/dot only.
  const metric = spec.distanceType === 'hamming' ? undefined : spec.distanceType;
  const ivf = { numPartitions: await numPartitions(table, spec), maxIterations: v.maxIterations, sampleRate: v.sampleRate };
  switch (spec.type) {
    case 'IVF_PQ':
      return Index.ivfPq({ ...ivf, distanceType: metric, numSubVectors: v.numSubVectors, numBits: v.numBits });
    case 'IVF_FLAT':
      return Index.ivfFlat({ ...ivf, distanceType: spec.distanceType });
    case 'IVF_RQ':
      return Index.ivfRq({ ...ivf, distanceType: metric, numBits: v.numBits });
    case 'IVF_HNSW_SQ':
      return Index.hnswSq({ ...ivf, distanceType: metric, m: v.m, efConstruction: v.efConstruction });
    case 'IVF_HNSW_PQ':
      return Index.hnswPq({ ...ivf, distanceType: metric, numSubVectors: v.numSubVectors, m: v.m, efConstruction: v.efConstruction });
    case 'BTREE':
      return Index.btree();
    case 'BITMAP':
      return Index.bitmap();
    case 'LABEL_LIST':
      return Index.labelList();
    default: {
      const f = spec.fts;
      return Index.fts({
        withPosition: f.withPosition,
        // Validated by the engine when the index is built ("unknown base tokenizer").
        baseTokenizer: f.baseTokenizer as BaseTokenizer,
        language: ftsLanguage(f.language),
        maxTokenLength: f.maxTokenLength,
        lowercase: f.lowerCase,
        stem: f.stem,
        removeStopWords: f.removeStopWords,
        asciiFolding: f.asciiFolding,
      });
    }
  }
}

function describe(config: import('@lancedb/lancedb').IndexConfig): IndexDescription {
  const details: unknown = config.indexDetails;
  return {
    name: config.name,
    uuid: config.indexUuid ?? '',
    columns: config.columns,
    type: friendlyType(config.indexType),
    typeUrl: config.typeUrl,
    numIndexedRows: config.numIndexedRows,
    numUnindexedRows: config.numUnindexedRows,
    sizeBytes: config.sizeBytes,
    numSegments: config.numSegments,
    createdAt: config.createdAt?.toISOString(),
    indexVersion: config.indexVersion,
    details: details === undefined || details === null ? undefined : typeof details === 'string' ? details : JSON.stringify(details),
  };
}

/** The indices operations of the Lance engine over @lancedb/lancedb; pylance builds the types it cannot. */
export class LancedbIndices implements IndexOps {
  constructor(
    private readonly access: TableAccess,
    private readonly pylance: PylanceIndexBuilder,
  ) {}

  createIndex(at: DatasetLocation, spec: IndexSpec): Promise<{ name: string; version: number }> {
    if (!BUILDABLE.includes(spec.type)) return this.pylance.createIndex(at, spec);
    return this.access.write(at, async (table) => {
      try {
        // Built in this call: the binding returns once the index is committed.
        await table.createIndex(spec.column, { config: await indexConfig(table, spec), name: spec.name, replace: false });
        return { name: spec.name, version: await table.version() };
      } catch (e) {
        throw classifyDataError(e);
      }
    });
  }

  listIndices(at: DatasetLocation, options: { version?: number | undefined } = {}): Promise<IndexDescription[]> {
    return this.access.read(
      at,
      async (table) => {
        try {
          return (await table.listIndices()).map(describe);
        } catch (e) {
          throw classifyDataError(e);
        }
      },
      options.version !== undefined ? { version: options.version } : {},
    );
  }

  dropIndex(at: DatasetLocation, name: string): Promise<{ version: number }> {
    return this.access.write(at, async (table) => {
      try {
        await table.dropIndex(name);
        return { version: await table.version() };
      } catch (e) {
        throw classifyDataError(e);
      }
    });
  }
}
