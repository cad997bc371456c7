import Foundation
import Logging
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where an ``Outbox`` keeps its entries so they survive the process: a directory
/// (``FileOutboxStorage``), a SQLite file (`SQLiteOutboxStorage`, StrataSQLite), PostgreSQL
/// (`PostgresOutboxStorage`, StrataPostgres), or memory (``MemoryOutboxStorage``, for previews and tests).
///
/// ## Contract
/// - ``save(_:)`` is durable and atomic: when it returns, the entry survives a crash or power loss,
///   and a crash during it leaves either the previous version of the entry or the new one, never a
///   torn mix. A failed save leaves the previous version.
/// - ``remove(_:)`` of a missing id succeeds.
/// - A save of an entry exactly as already stored (a retried save) leaves one entry, unchanged.
/// - ``loadAll()`` returns every entry saved and not removed, in any order. An entry it cannot read
///   back is set aside where an operator can find it (and logged), never deleted and never a crash.
/// - ``entry(_:)`` agrees with ``loadAll()`` for one id: the latest version saved, or `nil` when the
///   id was never saved, was removed, or its entry cannot be read back (set aside as by ``loadAll()``).
/// - Failures throw ``StoreError``.
///
/// One outbox should own a storage at a time; a second process draining the same storage (the
/// `strata outbox drain` command beside a running app) may send an entry twice, which the entry's
/// `Idempotency-Key` makes harmless on a server that honours it.
public protocol OutboxStorage: Sendable {
    /// Every entry, in any order.
    func loadAll() async throws -> [OutboxEntry]
    /// Inserts `entry`, or replaces the entry with its id.
    func save(_ entry: OutboxEntry) async throws
    /// Removes the entry with `id`; succeeds when there is none.
    func remove(_ id: UUID) async throws
    /// The entry with `id` as stored now, or `nil` when there is none. The ``Outbox`` reads an entry
    /// back after a save whose outcome it cannot know (the save threw, timed out or was cancelled,
    /// and may have committed all the same), so that `enqueue` answers "queued" or "not queued",
    /// never a guess. The default reads every entry; a storage with an index should answer directly.
    func entry(_ id: UUID) async throws -> OutboxEntry?
}

extension OutboxStorage {
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        try await loadAll().first { $0.id == id }
    }
}

/// Entries in memory: gone when the process ends. For previews, tests and writes that may be lost.
public final class MemoryOutboxStorage: OutboxStorage, CustomStringConvertible {
    private let entries = Locked<[UUID: OutboxEntry]>([:])

    /// An empty storage.
    public init() {}

    public func loadAll() async throws -> [OutboxEntry] { entries.withLock { Array($0.values) } }
    public func save(_ entry: OutboxEntry) async throws { entries.withLock { $0[entry.id] = entry } }
    public func remove(_ id: UUID) async throws { _ = entries.withLock { $0.removeValue(forKey: id) } }
    public func entry(_ id: UUID) async throws -> OutboxEntry? { entries.withLock { $0[id] } }

    public var description: String { "MemoryOutboxStorage" }
}

/// Entries as files in a directory: one file per entry, written to a temporary file, flushed to
/// disk, then renamed into place, so a crash never leaves a torn entry and a failed write keeps the
/// previous version.
///
/// Each file is a header line (`strata-outbox 1 <SHA-256 of the rest>`) and the entry as JSON; a file
/// whose checksum does not match (bit rot, a hand edit) is renamed to `<name>.unreadable`, logged,
/// and left for an operator. Files are created `0600` in a `0700` directory.
public final class FileOutboxStorage: OutboxStorage, CustomStringConvertible {
    /// The directory holding the entries.
    public let directory: URL
    private let logger: Logger

    /// Keeps entries in `directory` (created on first write when missing).
    public init(directory: URL, logger: Logger = LoadEnvironment.defaultLogger) {
        self.directory = directory
        self.logger = logger
    }

    public var description: String { "FileOutboxStorage(\(directory.path))" }

    static let fileExtension = "outbox"
    private static let magic = "strata-outbox 1 "

    private func path(for id: UUID) -> String {
        directory.appendingPathComponent("\(id.uuidString.lowercased()).\(Self.fileExtension)").path
    }

    private func failure(_ operation: StoreError.Operation, _ id: UUID?, _ error: any Error) -> StoreError {
        StoreError(store: description, operation: operation, key: id?.uuidString.lowercased(), reason: "\(error)", underlying: error)
    }

    public func loadAll() async throws -> [OutboxEntry] {
        try await BlockingIOPool.shared.run { () throws(StoreError) -> [OutboxEntry] in try self.loadAllNow() }
    }

    public func save(_ entry: OutboxEntry) async throws {
        try await BlockingIOPool.shared.run { () throws(StoreError) in try self.saveNow(entry) }
    }

    public func remove(_ id: UUID) async throws {
        try await BlockingIOPool.shared.run { () throws(StoreError) in
            do {
                try POSIXFile.remove(self.path(for: id))
            } catch {
                throw self.failure(.delete, id, error)
            }
        }
    }

    /// The entry with `id`, read from its one file, or `nil` when there is none. A file that is not
    /// an intact entry is set aside as ``loadAll()`` does (renamed `.unreadable`, logged) and reads as
    /// `nil`; a file holding the entry of another id reads as `nil` and is left alone.
    /// - Throws: `StoreError` (`.retrieve`) when the file exists and cannot be read.
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        try await BlockingIOPool.shared.run { () throws(StoreError) -> OutboxEntry? in try self.entryNow(id) }
    }

    /// The file's bytes for `entry`.
    static func encode(_ entry: OutboxEntry) throws -> Data {
        // Dates exactly as they are: milliseconds would move a live `Date()` by up to a millisecond,
        // and an outbox on a clock that stands still would find a write read back from disk not yet due.
        let json = try entry.encodedForStorage()
        let hex = SHA256.hexDigest(of: json)
        var data = Data((magic + hex + "\n").utf8)
        data.append(json)
        return data
    }

    /// The entry in a file's bytes, or `nil` when they are not a whole, intact entry.
    static func decode(_ data: Data) -> OutboxEntry? {
        guard let newline = data.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        let header = String(decoding: data[data.startIndex..<newline], as: UTF8.self)
        guard header.hasPrefix(magic) else { return nil }
        let json = data[data.index(after: newline)...]
        let hex = SHA256.hexDigest(of: json)
        guard header.dropFirst(magic.count) == hex else { return nil }
        return try? OutboxEntry(storageEncoding: Data(json))
    }

    private func saveNow(_ entry: OutboxEntry) throws(StoreError) {
        do {
            try POSIXFile.createDirectory(directory.path, mode: 0o700)
            let bytes = try Self.encode(entry)
            let target = path(for: entry.id)
            let temporary = directory.appendingPathComponent(".tmp-\(UUID().uuidString.lowercased())").path
            try POSIXFile.writeAtomically(bytes, to: target, via: temporary, mode: 0o600, sync: true)
        } catch {
            throw failure(.insert, entry.id, error)
        }
    }

    private func entryNow(_ id: UUID) throws(StoreError) -> OutboxEntry? {
        let path = path(for: id)
        let contents: Data?
        do {
            contents = try POSIXFile.read(path)?.data
        } catch {
            throw failure(.retrieve, id, error)
        }
        guard let contents else { return nil }
        guard let entry = Self.decode(contents) else {
            setAside(path)
            return nil
        }
        return entry.id == id ? entry : nil
    }

    private func loadAllNow() throws(StoreError) -> [OutboxEntry] {
        let names: [String]
        do {
            names = try POSIXFile.fileNames(in: directory.path)
        } catch let error as POSIXFile.Failure where error.code == ENOENT {
            return []
        } catch {
            throw failure(.retrieve, nil, error)
        }
        var entries: [OutboxEntry] = []
        let now = Date().timeIntervalSince1970
        for name in names {
            let path = directory.appendingPathComponent(name).path
            if name.hasPrefix(".tmp-") {
                // A write that did not finish (the process died before its rename): the entry it was
                // writing is still whole in its previous version, or was never acknowledged.
                _ = POSIXFile.removeIfOlder(path, than: 60, now: now)
                continue
            }
            guard name.hasSuffix(".\(Self.fileExtension)") else { continue }
            let contents: Data?
            do {
                contents = try POSIXFile.read(path)?.data
            } catch {
                throw failure(.retrieve, nil, error)
            }
            guard let contents else { continue }  // removed meanwhile
            if let entry = Self.decode(contents) {
                entries.append(entry)
            } else {
                setAside(path)
            }
        }
        return entries
    }

    /// Renames the unreadable file at `path` to a name no earlier unreadable copy of its entry holds
    /// (setting aside never deletes), and logs it.
    private func setAside(_ path: String) {
        var aside = path + ".unreadable"
        var copy = 1
        while access(aside, F_OK) == 0 {
            aside = path + ".unreadable.\(copy)"
            copy += 1
        }
        if rename(path, aside) == 0 {
            logger.error(
                "outbox entry unreadable; set aside, not deleted",
                metadata: ["outbox.storage": "\(description)", "outbox.file": "\(aside)"])
        } else if errno != ENOENT {  // ENOENT: removed meanwhile, or set aside by a concurrent read
            logger.error(
                "outbox entry unreadable, and it could not be set aside; left in place, skipped",
                metadata: ["outbox.storage": "\(description)", "outbox.file": "\(path)", "errno": "\(errno)"])
        }
    }
}
