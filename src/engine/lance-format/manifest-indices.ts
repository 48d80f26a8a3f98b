import { manifestBody, ProtoReader } from './manifest.js';
import { roaringValues } from './roaring.js';

// The indices a Lance manifest lists, whatever engine built them: the manifest's index section
// (Manifest.index_section = 6, a file position: u32 LE length, then `IndexSection{indices = 1}`),
// each `IndexMetadata{uuid = 1 (UUID{uuid = 1}), fields = 2, name = 3, fragment_bitmap = 5 (a
// portable Roaring bitmap of fragment ids), index_details = 6 (Any{type_url = 1, value = 2}),
// index_version = 7, created_at = 8 (ms), files = 10 (IndexFile{path = 1, size_bytes = 2}), covering_fields = 11
// (carried, not keyed: the tail of `fields`)}`; one
// entry per segment, segments of one index share its name. An index's type is the type URL of its
// details (`/lance.table.BTreeIndexDetails`, `/lance.index.pb.RTreeIndexDetails`, ...), and for a
// vector index its `VectorIndexDetails{metric_type = 1, hnsw_index_config = 3, compression: pq = 4,
// sq = 5, rq = 6, flat = 8}`. Columns are named from the schema (Manifest.fields = 1,
// `Field{name = 2, id = 3, parent_id = 4}`), rows counted from the fragments (Manifest.fragments =
// 2, `DataFragment{id = 1, deletion_file = 3 (num_deleted_rows = 4), physical_rows = 4}`).

/** One index of a manifest (all its segments). */
export interface ManifestIndex {
  name: string;
  /** Of its first segment. */
  uuid: string;
  /** Dotted paths of the columns it is keyed on. */
  columns: string[];
  /** The spec's name of its type (IVF_SQ, BTREE, RTREE, ...); undefined for a vector index whose details do not say (written before they did). */
  type: string | undefined;
  typeUrl: string;
  /** A vector index's metric (l2, cosine, dot, hamming), when its details say. */
  distanceType: string | undefined;
  /** Live rows of the fragments it covers, and of those it does not. */
  numIndexedRows: number;
  numUnindexedRows: number;
  numSegments: number;
  /** Bytes of its files, when every segment records them. */
  sizeBytes: number | undefined;
  /** ISO 8601, of its first segment, when recorded. */
  createdAt: string | undefined;
  indexVersion: number | undefined;
}

/** Type URLs of Lance's system indices (fragment reuse, MemWAL), which no listing shows. */
const SYSTEM_DETAILS = new Set(['fragmentreuseindexdetails', 'memwalindexdetails']);

/** Index types by the message name of their details, lower-cased, without `IndexDetails`. */
const SCALAR_TYPES = new Map([
  ['btree', 'BTREE'],
  ['bitmap', 'BITMAP'],
  ['labellist', 'LABEL_LIST'],
  ['inverted', 'FTS'],
  ['ngram', 'NGRAM'],
  ['zonemap', 'ZONEMAP'],
  ['bloomfilter', 'BLOOMFILTER'],
  ['rtree', 'RTREE'],
]);

const METRICS = ['l2', 'cosine', 'dot', 'hamming'];

interface Segment {
  name: string;
  uuid: string;
  fieldIds: number[];
  /** How many of fieldIds (at their end) the index carries rather than is keyed on. */
  covering: number;
  fragments: number[];
  typeUrl: string;
  details: Buffer;
  indexVersion: number | undefined;
  createdAtMillis: number | undefined;
  sizeBytes: number | undefined;
}

/** A field id as read (int32, negative ones sign-extended to 64 bits). */
const int32 = (value: number): number => (value >= 2 ** 31 ? -1 : value);

function uuidText(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return hex.length === 32 ? `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}` : hex;
}

function readSegment(entry: ProtoReader): Segment {
  const segment: Segment = {
    name: '',
    uuid: '',
    fieldIds: [],
    covering: 0,
    fragments: [],
    typeUrl: '',
    details: Buffer.alloc(0),
    indexVersion: undefined,
    createdAtMillis: undefined,
    sizeBytes: 0,
  };
  let files = 0;
  while (entry.next()) {
    if (entry.holds(1)) {
      const uuid = entry.inner();
      while (uuid.next()) if (uuid.holds(1)) segment.uuid = uuidText(uuid.bytes);
    } else if (entry.num === 2) segment.fieldIds.push(...entry.varints().map(int32));
    else if (entry.num === 11) segment.covering += entry.varints().length;
    else if (entry.holds(3)) segment.name = entry.bytes.toString('utf8');
    else if (entry.holds(5)) segment.fragments = roaringValues(entry.bytes);
    else if (entry.holds(6)) {
      const any = entry.inner();
      while (any.next()) {
        if (any.holds(1)) segment.typeUrl = any.bytes.toString('utf8');
        if (any.holds(2)) segment.details = Buffer.from(any.bytes);
      }
    } else if (entry.num === 7 && entry.wire === 0) segment.indexVersion = entry.value;
    else if (entry.num === 8 && entry.wire === 0) segment.createdAtMillis = entry.value;
    else if (entry.holds(10)) {
      files++;
      const file = entry.inner();
      while (file.next()) if (file.num === 2 && file.wire === 0 && segment.sizeBytes !== undefined) segment.sizeBytes += file.value;
    }
  }
  if (files === 0) segment.sizeBytes = undefined;
  return segment;
}

/** A vector index's type and metric from its VectorIndexDetails; the type is undefined when they name no compression. */
function vectorType(details: Buffer): { type: string | undefined; distanceType: string | undefined } {
  let metric = 0;
  let hnsw = false;
  let compression: string | undefined;
  const reader = new ProtoReader(details);
  while (reader.next()) {
    if (reader.num === 1 && reader.wire === 0) metric = reader.value;
    else if (reader.holds(3)) hnsw = true;
    else if (reader.holds(4)) compression = 'PQ';
    else if (reader.holds(5)) compression = 'SQ';
    else if (reader.holds(6)) compression = 'RQ';
    else if (reader.holds(8)) compression = 'FLAT';
  }
  const type = compression === undefined || (hnsw && compression === 'RQ') ? undefined : hnsw ? `IVF_HNSW_${compression}` : `IVF_${compression}`;
  // Details written before they named a compression say nothing of the metric either (its 0 is L2).
  return { type, distanceType: compression === undefined ? undefined : (METRICS[metric] ?? String(metric)) };
}

/** The type of an index from its details: a known scalar type, a vector type, or the details' message name upper-cased. */
function typeOf(typeUrl: string, details: Buffer): { type: string | undefined; distanceType: string | undefined } {
  const message = (typeUrl.split('.').pop() ?? typeUrl).toLowerCase().replace(/indexdetails$/, '');
  if (message === 'vector') return vectorType(details);
  return { type: SCALAR_TYPES.get(message) ?? message.toUpperCase(), distanceType: undefined };
}

/** Every user index a manifest file lists (system indices left out), in the order of their first segment. */
export function readManifestIndices(file: Buffer): ManifestIndex[] {
  const { body } = manifestBody(file);
  const fields = new Map<number, { name: string; parent: number }>();
  const liveRows = new Map<number, number>();
  let indexSection: number | undefined;
  const manifest = new ProtoReader(body);
  while (manifest.next()) {
    if (manifest.holds(1)) {
      let name = '';
      let id = 0;
      let parent = -1;
      const field = manifest.inner();
      while (field.next()) {
        if (field.holds(2)) name = field.bytes.toString('utf8');
        else if (field.num === 3 && field.wire === 0) id = int32(field.value);
        else if (field.num === 4 && field.wire === 0) parent = int32(field.value);
      }
      fields.set(id, { name, parent });
    } else if (manifest.holds(2)) {
      let id = 0;
      let rows = 0;
      const fragment = manifest.inner();
      while (fragment.next()) {
        if (fragment.num === 1 && fragment.wire === 0) id = fragment.value;
        else if (fragment.num === 4 && fragment.wire === 0) rows += fragment.value;
        else if (fragment.holds(3)) {
          const deletion = fragment.inner();
          while (deletion.next()) if (deletion.num === 4 && deletion.wire === 0) rows -= deletion.value;
        }
      }
      liveRows.set(id, rows);
    } else if (manifest.num === 6 && manifest.wire === 0) indexSection = manifest.value;
  }
  if (indexSection === undefined) return [];
  if (indexSection + 4 > file.length) throw new Error('index section out of range');
  const length = file.readUInt32LE(indexSection);
  const section = new ProtoReader(file, indexSection + 4, indexSection + 4 + length);
  const byName = new Map<string, Segment[]>();
  while (section.next()) {
    if (!section.holds(1)) continue;
    const segment = readSegment(section.inner());
    const message = (segment.typeUrl.split('.').pop() ?? '').toLowerCase();
    if (SYSTEM_DETAILS.has(message)) continue;
    const segments = byName.get(segment.name);
    if (segments) segments.push(segment);
    else byName.set(segment.name, [segment]);
  }

  const path = (id: number): string => {
    const parts: string[] = [];
    for (let at = fields.get(id), hops = 0; at !== undefined && hops < 64; at = fields.get(at.parent), hops++) parts.unshift(at.name);
    return parts.join('.');
  };
  let totalRows = 0;
  for (const rows of liveRows.values()) totalRows += rows;
  return [...byName.values()].map((segments) => {
    const [first] = segments as [Segment, ...Segment[]];
    const covered = new Set(segments.flatMap((s) => s.fragments));
    let indexed = 0;
    for (const [id, rows] of liveRows) if (covered.has(id)) indexed += rows;
    const sizes = segments.map((s) => s.sizeBytes);
    return {
      name: first.name,
      uuid: first.uuid,
      columns: first.fieldIds.slice(0, Math.max(1, first.fieldIds.length - first.covering)).map(path),
      ...typeOf(first.typeUrl, first.details),
      typeUrl: first.typeUrl,
      numIndexedRows: indexed,
      numUnindexedRows: totalRows - indexed,
      numSegments: segments.length,
      sizeBytes: sizes.every((s) => s !== undefined) ? sizes.reduce((a, b) => a + b, 0) : undefined,
      createdAt: first.createdAtMillis === undefined ? undefined : new Date(first.createdAtMillis).toISOString(),
      indexVersion: first.indexVersion,
    };
  });
}
