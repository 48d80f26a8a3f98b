import { setImmediate as nextTurn } from 'node:timers/promises';

/** Bytes copied between two turns of the event loop: a few ms of work at most. */
export const SLICE_BYTES = 4 * 1024 * 1024;

/**
 * Joins chunks into one new Buffer of `size` bytes, copying a slice at a time and handing the event
 * loop back between slices. A plain Buffer.concat of a few hundred MiB blocks the loop for hundreds
 * of ms on a busy machine: the copy itself and the first touch of every page of the new memory.
 */
export async function joinYielding(chunks: readonly Uint8Array[], size: number): Promise<Buffer> {
  const joined = Buffer.allocUnsafe(size);
  let at = 0;
  let sinceTurn = 0;
  for (const chunk of chunks) {
    for (let from = 0; from < chunk.byteLength; from += SLICE_BYTES) {
      const part = chunk.subarray(from, Math.min(from + SLICE_BYTES, chunk.byteLength));
      joined.set(part, at);
      at += part.byteLength;
      sinceTurn += part.byteLength;
      if (sinceTurn >= SLICE_BYTES) {
        sinceTurn = 0;
        await nextTurn();
      }
    }
  }
  return joined;
}
