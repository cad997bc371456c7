/// The exit codes of `strata send` and `strata outbox`, one meaning each, so a script can tell what
/// happened to a write without reading the text.
public enum OutboxExitCode: Int32, Sendable, CaseIterable {
    /// Done: `send` sent the write (2xx) or queued it durably; `drain` delivered every write that was
    /// due; `list`, `count`, `retry` and `discard` did what was asked.
    case ok = 0
    /// The outbox could not be opened, read or written. For `send`: the write was not queued (and not
    /// sent). Standard error says which store failed and why.
    case storage = 1
    /// The server refused a write for good (a 4xx such as 400 or 422, a 401 it kept answering, a 501):
    /// it is parked as a dead letter, kept until `strata outbox retry` or `discard`. For `drain`: at
    /// least one write was parked by this drain.
    case parked = 2
    /// `send` with `--if-match`: the server answered 409 or 412 (the resource changed meanwhile); the
    /// write is parked as a dead letter with the reason `conflict`.
    case conflict = 3
    /// No entry has that id, or the prefix given matches more than one.
    case noSuchEntry = 4
    /// `retry` or `discard` of a write that is pending, not parked: refused (a pending write may be in
    /// flight; only dead letters are retried or discarded).
    case notParked = 5
    /// Bad flags, a bad URL or header, a `--data` file that cannot be read (ArgumentParser's usage
    /// error code, as for `strata fetch`).
    case usage = 64
    /// `drain`: some writes are still queued because the server could not be reached or failed
    /// transiently (408, 429, 5xx); try again later (`EX_TEMPFAIL`).
    case deferred = 75

    /// The table the commands' help prints.
    static let helpTable = """
        Exit codes:
          0   send: sent or queued; drain: every due write delivered; others: done
          1   the outbox's store failed (send: nothing queued, nothing sent)
          2   parked as a dead letter: refused by the server (4xx, 501)
          3   send --if-match: parked as a conflict (409, 412)
          4   no entry has that id, or the prefix fits several
          5   retry/discard refused: the write is pending, not parked
          64  bad flags, URL, header or --data
          75  drain: writes still queued (server unreachable or failing)
        """
}
