/** What the services log through (pino's shape, so the server's logger fits). */
export interface ServiceLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}
