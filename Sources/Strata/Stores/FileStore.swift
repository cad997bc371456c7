import Foundation
import Logging
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A persistent store with one file per key in a directory.
///
/// - File names are the SHA-256 of the key, so any key (`"../../etc/passwd"`, emoji, 10 KB of text)
///   maps to a fixed-length name inside the directory.
/// - Writes go to a temporary file in the same directory, are flushed, then renamed over the entry:
///   readers and other processes see the old entry or the new one, never a torn one, and a failed
///   write leaves the previous entry untouched.
/// - Files are created with mode `0600`, the directory (created on first write) with `0700`.
/// - An entry that does not parse or decode is a miss: it is removed and logged at `warning`.
/// - Two `FileStore`s on the same directory, in one process or several, see each other's writes.
/// - A process killed mid-write leaves its temporary file behind. The store removes those over an
///   hour old (younger ones may be another process's write in progress) on its first write, or with
///   limits at compaction; ``removeTemporaryFiles(olderThan:)`` does it on demand.
/// - The file I/O (and, with limits, waiting for another process's index lock) runs on threads of
///   its own, never on Swift's cooperative pool: a slow disk delays the store's callers, not every
///   task of the process. A write whose caller is cancelled still completes.
///
/// ## Limits
/// With a `countLimit` or `byteLimit` the store evicts least recently used entries when an insert
/// goes over a limit. It keeps an index for that: an append-only journal (`.strata-index`, next to a
/// `.strata-index.lock` file) of accesses and removals, so opening a store costs the same with ten
/// entries or a million. The journal is read on the first insert, not when the store is created;
/// a delete only appends a record, and a retrieve writes nothing: the reads are kept in memory and
/// appended, in order, by this store's next write (so its evictions always count them; another
/// process sees them from then on, and reads never followed by a write are forgotten when the
/// process ends). The entry files stay the truth: a missing or damaged
/// journal is rebuilt from one listing of the directory, and compaction (once the journal holds more
/// than twice as many records as live entries) drops entries whose files are gone, adopts files it
/// does not know, and sweeps temporary files left behind by a crash mid-write. Stores with limits in
/// several processes share the journal under `flock`; an entry one evicts is simply a miss to the others.
/// A store without limits keeps no index and writes only the entry files.
///
/// ```swift
/// let store = FileStore<[FeedItem]>(directory: cachesDirectory.appending(path: "feed"))
/// let bounded = FileStore<Data>(directory: imagesDirectory, codec: DataCodec(), byteLimit: 50_000_000)
/// ```
public final class FileStore<Value: Sendable>: Store, Sendable {
    public typealias Key = String

    /// The directory holding the entries.
    public let directory: URL
    /// The most entries kept; `nil` for no limit.
    public let countLimit: Int?
    /// The most bytes of entry files kept (each entry's file size: header, key and encoded value);
    /// `nil` for no limit.
    public let byteLimit: Int?
    private let directoryPath: String
    private let codec: any Codec<Value>
    private let synchronizesWrites: Bool
    private let logger: Logger
    /// The least-recently-used index; only stores with a limit keep one.
    let index: FileStoreIndex?
    /// What this store has read and scanned (for tests).
    let ioCounts = Locked(FileStoreIOCounts())
    /// Whether this instance has swept its directory's leftover temporary files (stores without
    /// limits do it once, on their first write).
    private let sweptOnce = Locked(false)
    /// Held by every change this instance makes to its entry files (insert's rename, refresh's read
    /// and rewrite, delete, removeAll), so a refresh cannot overwrite an insert that lands meanwhile.
    /// Its state counts those changes.
    private let writeLock = Locked<UInt64>(0)
    /// Test hooks: called by `refresh` between its read and its write, and by a change that finds the
    /// write lock taken, just before it waits for it.
    let hooks = Locked(FileStoreHooks())

    /// Creates a store in `directory` that encodes values with `codec`.
    /// - Parameters:
    ///   - directory: the directory holding the entries; created (mode `0700`) on the first write.
    ///   - codec: turns values into bytes and back.
    ///   - countLimit: the most entries kept; beyond it an insert evicts the least recently used.
    ///     `nil` (the default) for no limit.
    ///   - byteLimit: the most bytes of entry files kept; beyond it an insert evicts the least recently
    ///     used. An entry larger than the whole limit is not kept, and the entry it would have replaced
    ///     is removed as out of date (as ``MemoryStore`` does with `costLimit`). `nil` (the default) for
    ///     no limit.
    ///   - synchronizesWrites: flush each entry to stable storage (`fsync`) before it replaces the old
    ///     one. On by default; turn off only for caches you can afford to lose on power failure.
    ///   - logger: where corrupt entries, removal failures and index repairs are reported.
    ///
    /// Creating a store does no I/O, with or without limits.
    public init(
        directory: URL,
        codec: some Codec<Value>,
        countLimit: Int? = nil,
        byteLimit: Int? = nil,
        synchronizesWrites: Bool = true,
        logger: Logger = Logger(label: "strata.filestore")
    ) {
        precondition(countLimit.map { $0 > 0 } ?? true, "countLimit must be positive")
        precondition(byteLimit.map { $0 > 0 } ?? true, "byteLimit must be positive")
        self.directory = directory.standardizedFileURL
        self.directoryPath = self.directory.path
        self.codec = codec
        self.countLimit = countLimit
        self.byteLimit = byteLimit
        self.synchronizesWrites = synchronizesWrites
        self.logger = logger
        if countLimit != nil || byteLimit != nil {
            index = FileStoreIndex(
                directoryPath: directoryPath, countLimit: countLimit, byteLimit: byteLimit,
                synchronizesWrites: synchronizesWrites, storeDescription: "FileStore(\(directoryPath))",
                logger: logger, counts: ioCounts)
        } else {
            index = nil
        }
    }

    /// Creates a store in `directory` that encodes values as JSON.
    public convenience init(
        directory: URL,
        countLimit: Int? = nil,
        byteLimit: Int? = nil,
        synchronizesWrites: Bool = true,
        logger: Logger = Logger(label: "strata.filestore")
    ) where Value: Codable {
        self.init(
            directory: directory, codec: JSONCodec<Value>(), countLimit: countLimit, byteLimit: byteLimit,
            synchronizesWrites: synchronizesWrites, logger: logger)
    }

    public var origin: Origin { .disk }

    /// The file that holds (or would hold) the entry for `key`.
    public func fileURL(for key: String) -> URL {
        directory.appendingPathComponent(SHA256.hexDigest(key), isDirectory: false)
    }

    public func retrieve(_ key: String) async throws -> CacheEntry<Value>? {
        try await BlockingIOPool.shared.run { try self.retrieveNow(key) }
    }

    public func insert(_ entry: CacheEntry<Value>, for key: String) async throws {
        try await BlockingIOPool.shared.run { try self.insertNow(entry, for: key) }
    }

    /// Re-stamps the entry for `key` by rewriting only its header: the payload bytes are copied as
    /// they are, never decoded or encoded again. The new file replaces the old one the way an insert
    /// does (temporary file, flush, rename), so a failed refresh leaves the entry as it was.
    ///
    /// Returns `false` when there is no entry, when the file holds another key's entry, or when the
    /// entry is corrupt (it is then removed, as ``retrieve(_:)`` does). With limits, a refresh counts
    /// as a use of the entry.
    ///
    /// The read and the rewrite run under a lock this store's `insert`, `delete` and `removeAll`
    /// also take, so an insert through this store while a refresh runs is never overwritten with the
    /// value the refresh read. The lock is the instance's: an insert of the same key by another
    /// `FileStore` instance or another process between the read and the rename is still overwritten.
    /// - Throws: ``StoreError`` (`.refresh`) when the entry cannot be read or the new file written.
    public func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        try await BlockingIOPool.shared.run { try self.refreshNow(key, storedAt: storedAt, validators: validators) }
    }

    public func delete(_ key: String) async throws {
        try await BlockingIOPool.shared.run { try self.deleteNow(key) }
    }

    /// Removes every entry file in the directory.
    ///
    /// Without limits it unlinks each entry file (64 hexadecimal digits) and leaves temporary files
    /// alone: they may be writes in progress (see ``removeTemporaryFiles(olderThan:)``). With limits
    /// it does so under the index's locks (this instance's mutex and the `flock` other processes
    /// share), then resets the journal to empty, so the limits count from zero again. A missing
    /// directory holds nothing to remove.
    /// - Throws: ``StoreError`` (`.delete`, no key) when the directory cannot be listed or a file
    ///   cannot be removed (the entries not yet removed are then still there).
    public func removeAll() async throws {
        try await BlockingIOPool.shared.run { try self.removeAllNow() }
    }

    // The operations themselves. They block in system calls (and, with limits, in `flock` while
    // another process holds the index), so the methods above run them on the blocking-I/O pool,
    // never on a thread of the cooperative pool.

    private func retrieveNow(_ key: String) throws(StoreError) -> CacheEntry<Value>? {
        let name = EntryName(key: key)
        let path = directoryPath + "/" + name.fileName
        let contents: (data: Data, inode: UInt64)?
        do {
            ioCounts.withLock { $0.entryReads += 1 }
            contents = try POSIXFile.read(path)
        } catch {
            throw StoreError(store: description, operation: .retrieve, key: key, reason: "\(error)", underlying: error)
        }
        guard let contents else {
            // Gone behind the index's back (another process, or by hand): it no longer counts.
            index?.recordRemoval(name, onlyIfIndexed: true)
            return nil
        }
        guard let (header, payload) = EntryEnvelope.decode(contents.data) else {
            discardCorrupt(name, path: path, inode: contents.inode, key: key, reason: "not a valid Strata entry (\(contents.data.count) bytes)")
            return nil
        }
        guard header.key == key else {
            // Another key's entry under our file name: only a hash collision or a copied file can do
            // this. It is not ours to delete; for us it is a miss.
            return nil
        }
        do {
            let value = try codec.decode(payload)
            index?.recordAccess(name)
            return CacheEntry(value: value, storedAt: header.storedAt, validators: header.validators)
        } catch {
            discardCorrupt(name, path: path, inode: contents.inode, key: key, reason: "payload does not decode: \(error)")
            return nil
        }
    }

    private func insertNow(_ entry: CacheEntry<Value>, for key: String) throws(StoreError) {
        let bytes = try EntryEnvelope.encode(entry, key: key, codec: codec, store: description)
        do {
            try POSIXFile.createDirectory(directoryPath, mode: 0o700)
            try lockingWrites { try write(bytes, as: EntryName(key: key)) }
        } catch {
            throw StoreError(store: description, operation: .insert, key: key, reason: "\(error)", underlying: error)
        }
    }

    private func refreshNow(_ key: String, storedAt: Date, validators: CacheValidators) throws(StoreError) -> Bool {
        do {
            return try lockingWrites { try refreshLocked(key, storedAt: storedAt, validators: validators) }
        } catch {
            throw StoreError(store: description, operation: .refresh, key: key, reason: "\(error)", underlying: error)
        }
    }

    private func refreshLocked(_ key: String, storedAt: Date, validators: CacheValidators) throws -> Bool {
        let name = EntryName(key: key)
        let path = directoryPath + "/" + name.fileName
        do {
            ioCounts.withLock { $0.entryReads += 1 }
            guard let contents = try POSIXFile.read(path) else {
                index?.recordRemoval(name, onlyIfIndexed: true)
                return false
            }
            guard let (header, payload) = EntryEnvelope.decode(contents.data) else {
                discardCorrupt(name, path: path, inode: contents.inode, key: key, reason: "not a valid Strata entry (\(contents.data.count) bytes)")
                return false
            }
            // Another key's entry under our file name (see `retrieve`): not ours to touch.
            guard header.key == key else { return false }
            hooks.withLock { $0.afterRefreshRead }?()
            let bytes = EntryEnvelope.encode(key: key, storedAt: storedAt, validators: validators, payload: payload)
            try write(bytes, as: name)
            // A re-stamped entry that no longer fits the byte limit is evicted by the write: not kept.
            return byteLimit.map { bytes.count <= $0 } ?? true
        }
    }

    /// Runs `body` holding this instance's write lock.
    private func lockingWrites<Result>(_ body: () throws -> Result) throws -> Result {
        try writeLock.withLock(onContention: { hooks.withLock { $0.waitingForWriteLock }?() }) { changes in
            changes &+= 1
            return try body()
        }
    }

    /// Puts `bytes` in place as the entry `name`: written to a temporary file, flushed, renamed over
    /// the entry; with limits, recorded as a use and followed by eviction.
    private func write(_ bytes: Data, as name: EntryName) throws {
        let path = directoryPath + "/" + name.fileName
        let temporaryPath = directoryPath + "/" + FileStoreIndex.temporaryPrefix + UUID().uuidString
        guard let index else {
            try POSIXFile.writeAtomically(bytes, to: path, via: temporaryPath, mode: 0o600, sync: synchronizesWrites)
            sweepOnFirstWrite()
            return
        }
        // The slow part (writing and flushing) runs unlocked; only the rename into place and the
        // bookkeeping run under the index lock, so the journal records changes in the order they happen.
        try POSIXFile.writeNew(bytes, at: temporaryPath, mode: 0o600, sync: synchronizesWrites)
        do {
            try index.commit(name, size: bytes.count, from: temporaryPath, to: path)
        } catch {
            unlink(temporaryPath)
            throw error
        }
    }

    private func deleteNow(_ key: String) throws(StoreError) {
        let name = EntryName(key: key)
        let path = directoryPath + "/" + name.fileName
        do {
            try lockingWrites {
                if let index {
                    try index.remove(name, at: path)
                } else {
                    try POSIXFile.remove(path)
                }
            }
        } catch {
            throw StoreError(store: description, operation: .delete, key: key, reason: "\(error)", underlying: error)
        }
    }

    private func removeAllNow() throws(StoreError) {
        do {
            try lockingWrites {
                if let index {
                    try index.removeAll()
                } else {
                    try Self.removeEntryFiles(in: directoryPath)
                }
            }
        } catch {
            throw StoreError(store: description, operation: .delete, key: nil, reason: "cannot remove all entries: \(error)", underlying: error)
        }
    }

    /// Unlinks every entry file (a name of 64 hexadecimal digits) in `directoryPath`; leaves temporary
    /// files, the index journal and its lock file alone. A missing directory holds nothing.
    static func removeEntryFiles(in directoryPath: String) throws {
        let names: [String]
        do {
            names = try POSIXFile.fileNames(in: directoryPath)
        } catch let failure as POSIXFile.Failure where failure.code == ENOENT {
            return
        }
        for fileName in names where EntryName(fileName: fileName) != nil {
            try POSIXFile.remove(directoryPath + "/" + fileName)
        }
    }

    /// Removes the temporary files that writes interrupted by a crash or a kill left in the
    /// directory, and returns how many it removed.
    ///
    /// A write goes to a temporary file that is renamed over the entry; a process killed between the
    /// two leaves that file behind, as large as the entry. Stores sweep them on their own: one without
    /// limits on its first write after it is created, one with limits whenever it compacts its index,
    /// each removing those older than an hour. Call this to sweep on a schedule of your own.
    ///
    /// - Parameter age: only files last modified longer ago than this are removed; a younger one may
    ///   be a write in progress in another process. Pass `.zero` only when no other process writes to
    ///   the directory.
    /// - Throws: ``StoreError`` (`.delete`, no key) when the directory cannot be listed. A missing
    ///   directory holds nothing to sweep.
    @discardableResult
    public func removeTemporaryFiles(olderThan age: Duration = .seconds(3600)) async throws -> Int {
        try await BlockingIOPool.shared.run { () throws(StoreError) -> Int in
            do {
                return try self.sweepTemporaryFiles(olderThan: age / .seconds(1))
            } catch {
                throw StoreError(store: self.description, operation: .delete, key: nil, reason: "cannot sweep temporary files: \(error)", underlying: error)
            }
        }
    }

    /// One sweep of the leftover temporary files older than an hour, by a store without limits, on
    /// its first write. It never fails the write: a directory that cannot be listed is only logged.
    private func sweepOnFirstWrite() {
        guard !sweptOnce.withLock({ swept in defer { swept = true }; return swept }) else { return }
        do {
            try sweepTemporaryFiles(olderThan: FileStoreIndex.staleTemporaryAge)
        } catch {
            logger.warning(
                "cannot sweep temporary files left by interrupted writes",
                metadata: ["store": "\(description)", "reason": "\(error)"])
        }
    }

    @discardableResult
    private func sweepTemporaryFiles(olderThan age: TimeInterval) throws -> Int {
        ioCounts.withLock { $0.directoryScans += 1 }
        let names: [String]
        do {
            names = try POSIXFile.fileNames(in: directoryPath)
        } catch let failure as POSIXFile.Failure where failure.code == ENOENT {
            return 0
        }
        let now = Date().timeIntervalSince1970
        var swept = 0
        for name in names where name.hasPrefix(FileStoreIndex.temporaryPrefix) {
            if POSIXFile.removeIfOlder(directoryPath + "/" + name, than: age, now: now) { swept += 1 }
        }
        if swept > 0 {
            ioCounts.withLock { $0.temporaryFilesSwept += swept }
            logger.notice(
                "removed temporary files left by interrupted writes",
                metadata: ["store": "\(description)", "count": "\(swept)"])
        }
        return swept
    }

    private func discardCorrupt(_ name: EntryName, path: String, inode: UInt64, key: String, reason: String) {
        logger.warning(
            "removing corrupt cache entry",
            metadata: ["store": "\(description)", "key": "\(key)", "file": "\(path)", "reason": "\(reason)"])
        POSIXFile.remove(path, ifInode: inode)
        index?.recordRemoval(name, onlyIfIndexed: false)
    }
}

/// Hooks a test sets to make an interleaving of a ``FileStore``'s operations certain.
struct FileStoreHooks: Sendable {
    /// Called by `refresh` after it read the entry and before it writes the re-stamped one.
    var afterRefreshRead: (@Sendable () -> Void)?
    /// Called by a change that finds the write lock held by another, before it waits for it.
    var waitingForWriteLock: (@Sendable () -> Void)?
}

extension FileStore: CustomStringConvertible {
    public var description: String { "FileStore(\(directoryPath))" }
}
