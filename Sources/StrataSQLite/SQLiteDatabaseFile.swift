#if SQLite
import Foundation
import GRDB

/// Opening a database file the way the SQLite stores do: the directory (`0700`) and the file
/// (`0600`) created first, so the database never starts with the process's default mode, and a
/// `DatabasePool` (WAL) whose opening is retried while another process holds the new file's lock.
enum SQLiteDatabaseFile {
    /// Creates the directory and an empty file (which SQLite treats as an empty database) unless they exist.
    static func create(at path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !FileManager.default.fileExists(atPath: directory) {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
        } else if errno != EEXIST {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    /// Opens a pool on `path` (which must exist).
    ///
    /// Switching a new file to WAL takes an exclusive lock, and SQLite does not run the busy handler
    /// for it: a process opening the same new file at that moment gets `SQLITE_BUSY` at once. That
    /// is contention, not a bad file, so the open is retried with short waits for up to ~2 s.
    static func openPool(path: String, configuration: Configuration) throws -> DatabasePool {
        var attempt = 0
        while true {
            do {
                return try DatabasePool(path: path, configuration: configuration)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && attempt < 40 {
                attempt += 1
                usleep(UInt32(min(attempt, 10)) * 5_000)
            }
        }
    }

    /// An SQLite error in words, with its extended result code.
    static func reason(for error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "\(error.message ?? "SQLite error") (SQLite result code \(error.extendedResultCode.rawValue))"
        }
        return "\(error)"
    }
}
#endif
