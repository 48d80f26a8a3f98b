import { setImmediate as nextTurn } from 'node:timers/promises';

/** Work between two turns of the event loop: this many bytes copied or re-framed... */
const SLICE_BYTES = 4 * 1024 * 1024;
/** ...or this much time, whichever comes first (many small pieces cost time, not bytes). */
const TURN_MS = 10;

/** Hands the event loop back once a slice of bytes or a few ms of work have gone by since the last turn. */
export class Pacer {
  private bytes = 0;
  private since = performance.now();

  async after(bytes: number): Promise<void> {
    this.bytes += bytes;
    if (this.bytes < SLICE_BYTES && performance.now() - this.since < TURN_MS) return;
    await nextTurn();
    this.bytes = 0;
    this.since = performance.now();
  }
}

/**
 * Joins chunks into one new Buffer of `size` bytes, copying a slice at a time and handing the event
 * loop back between slices. A plain Buffer.concat of a few hundred MiB blocks the loop for hundreds
 * of ms on a busy machine: the copy itself and the first touch of every page of the new memory.
 */
export async function joinYielding(chunks: readonly Uint8Array[], size: number): Promise<Buffer> {
  const joined = Buffer.allocUnsafe(size);
  const pacer = new Pacer();
  let at = 0;
  for (const chunk of chunks) {
    for (let from = 0; from < chunk.byteLength; from += SLICE_BYTES) {
      const part = chunk.subarray(from, Math.min(from + SLICE_BYTES, chunk.byteLength));
      joined.set(part, at);
      at += part.byteLength;
      await pacer.after(part.byteLength);
    }
  }
  return joined;
}
