import type { ServiceLogger } from '../context/logger.js';

// What a single commit leaves for after its answer (single-commit.ts): placing Lance's hint, then
// releasing the version slot. The answer waits for what makes the version committed and durable
// (and for the staged file's delete, as its writer may stage its next version under the same
// name); neither of these is part of that, and each is safe to lose with the process: a stale
// hint is probed past (TableVersions.latest), and a hold that is never released holds nothing up
// once its lease has run out (a drop passes it by, and a writer of that version takes it over;
// until the table is dropped it stays behind, an expired reservation of a committed version).
// Done after the answer, they leave the writer's critical path: a Lance writer's next request
// comes after work of its own. A drop still waits for them, since it waits for the slot, which
// is released last.

/** Resolves in a later turn of the event loop: after an answer made in this one has been written to its socket. */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Work begun for after an answer, tracked so that shutdown (and a test) can wait for it. */
export class AfterAnswer {
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly logger?: ServiceLogger) {}

  /** Tracks `work`, already under way; its failure is logged, never thrown at anyone. */
  add(what: string, work: Promise<unknown>): void {
    const tracked: Promise<void> = work
      .then(
        () => undefined,
        (e: unknown) => this.logger?.warn({ err: e }, `${what}: failed after the answer`),
      )
      .finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  /** Resolves once everything added so far (and whatever it added meanwhile) has ended. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
