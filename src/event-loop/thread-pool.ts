// The size of libuv's thread pool, set before anything starts it: main.ts imports this module
// alone, and the service (serve.ts) only once it ran. libuv reads UV_THREADPOOL_SIZE once, when
// the pool first runs work, and loading a graph of ES modules may be such work.
//
// Why 16, not libuv's 4: every durable write waits in an fsync on the pool, and on a local disk
// each can take milliseconds while the journal commits; with 4 threads, 8 clients' fsyncs fill the
// pool and every other pool call (a non-durable put, a large directory's read) queues behind them.
// Measured with 8 fsyncing writers: an empty put took 1.6-2.9 ms with 4 threads, 0.15-0.9 ms with
// 16. Idle threads cost a stack each (no CPU). A size set in the environment is kept.
process.env.UV_THREADPOOL_SIZE ??= '16';
