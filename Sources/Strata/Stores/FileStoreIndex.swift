import Foundation
import Logging
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a ``FileStore`` has read and scanned: the seam tests use to prove that opening a store costs
/// nothing per entry.
struct FileStoreIOCounts: Sendable, Equatable {
    /// Entry files opened for reading.
    var entryReads = 0
    /// Whole reads of the index journal (a store loads it at most once, unless another process compacts it).
    var journalLoads = 0
    /// Directory listings (index rebuilds, compactions and temporary-file sweeps only).
    var directoryScans = 0
    /// Index rebuilds from the directory (the index was missing or damaged).
    var rebuilds = 0
    /// Compactions of the index journal.
    var compactions = 0
    /// Stale temporary files removed.
    var temporaryFilesSwept = 0
}

/// The least-recently-used index of a ``FileStore`` with limits: an append-only journal of accesses
/// and removals in the store's directory, guarded across processes by `flock` on a lock file.
///
/// - Opening costs nothing: the journal is read on the first insert (the first operation that needs
///   to know what to evict), not before. A delete only appends a record; a read writes nothing (its
///   recency is appended by this instance's next write).
/// - The entry files are the truth. A missing or damaged journal is rebuilt from a directory listing
///   (the one time the store lists its directory outside compaction); compaction also lists the
///   directory, drops entries whose files are gone, adopts files the journal does not know, and
///   sweeps temporary files left by a crash mid-write.
/// - Every mutation of an entry file by a limited store (rename into place, unlink) happens while the
///   lock is held, so the journal's order is the order of the changes, in every process.
final class FileStoreIndex: Sendable {
    /// How long a temporary file may exist before a sweep treats it as left by a crash. Writes take
    /// milliseconds; an hour leaves any live writer, even on a slow disk, alone.
    static let staleTemporaryAge: TimeInterval = 3600
    /// How the names of temporary files (writes in progress, or left by a crash) begin.
    static let temporaryPrefix = ".tmp-"
    /// A journal is compacted once it holds more than twice as many records as live entries, and at
    /// least this many.
    static let minimumCompactionRecords = 256

    let directoryPath: String
    let countLimit: Int?
    let byteLimit: Int?
    let synchronizesWrites: Bool
    let storeDescription: String
    let logger: Logger
    let counts: Locked<FileStoreIOCounts>
    private let state = Locked(State())

    private var journalPath: String { directoryPath + "/" + IndexJournal.fileName }
    private var lockPath: String { directoryPath + "/" + IndexJournal.lockFileName }

    init(
        directoryPath: String, countLimit: Int?, byteLimit: Int?, synchronizesWrites: Bool,
        storeDescription: String, logger: Logger, counts: Locked<FileStoreIOCounts>
    ) {
        self.directoryPath = directoryPath
        self.countLimit = countLimit
        self.byteLimit = byteLimit
        self.synchronizesWrites = synchronizesWrites
        self.storeDescription = storeDescription
        self.logger = logger
        self.counts = counts
    }

    deinit {
        state.withLock { $0.closeFiles() }
    }

    // MARK: Operations

    /// Renames the freshly written `temporaryPath` over `path` as the entry `name` of `size` bytes,
    /// then evicts least recently used entries until the limits hold again.
    ///
    /// Throws only when the entry could not be put in place (the previous entry, if any, is then
    /// untouched); failures to update the journal afterwards are logged and repaired by compaction.
    func commit(_ name: EntryName, size: Int, from temporaryPath: String, to path: String) throws {
        let committed: Void? = try exclusively { state in
            try synchronize(&state, load: true)
            if let byteLimit, size > byteLimit {
                // Keeping it would evict everything else and still break the limit: drop it, and the
                // previous entry it replaces, which is now out of date.
                unlink(temporaryPath)
                try POSIXFile.remove(path)
                logger.debug(
                    "entry larger than the store's byte limit is not kept",
                    metadata: ["store": "\(storeDescription)", "file": "\(path)", "size": "\(size)", "byteLimit": "\(byteLimit)"])
                bestEffort("record a removal") { try append(.remove(name), to: &state) }
                return
            }
            // Recorded before the rename (write-ahead): a crash between the two leaves a record whose
            // file is missing or older, which the next read or compaction corrects, never an entry
            // file the index does not count against the limits.
            bestEffort("record an insert") { try append(.access(name, size: size), to: &state) }
            do {
                try POSIXFile.commit(temporaryPath, to: path, sync: synchronizesWrites)
            } catch {
                // Nothing was put in place: record what is really there (the previous entry, or none).
                var info = stat()
                let previous: IndexJournal.Record = lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
                    ? .access(name, size: Int(info.st_size)) : .remove(name)
                bestEffort("record a failed insert") { try append(previous, to: &state) }
                throw error
            }
            bestEffort("record an insert") {
                try evict(keeping: name, in: &state)
                try compactIfNeeded(&state)
            }
        }
        if committed == nil {
            throw POSIXFile.Failure(call: "open", path: lockPath, code: ENOENT)
        }
    }

    /// Notes that `name` was just read, making it the most recently used entry. It writes nothing: a
    /// read never takes the `flock` or appends to the journal (no disk write per read, which wears
    /// flash and fails while iOS data protection keeps the file locked). The reads noted since the
    /// last write are appended to the journal by the next operation of this instance that writes it
    /// (an insert, which evicts by recency only after that, a delete, a removal), in the order they
    /// happened. So eviction in this process always sees its reads; another process sees them once this
    /// one writes, and reads not followed by a write before the process ends are not remembered.
    func recordAccess(_ name: EntryName) {
        state.withLock { state in
            // Only each entry's latest read matters to the order, so an entry is noted once.
            state.pendingAccesses.upsert(name, (), cost: 0)
            // A process that only reads: the least recent reads go first (recency is best effort).
            if state.pendingAccesses.count > Self.maximumPendingAccesses { state.pendingAccesses.removeLeastRecent() }
        }
    }

    /// The most entries whose reads are kept in memory between two writes of the journal.
    static let maximumPendingAccesses = 4096

    /// Records that `name` is gone (a miss for an entry the index still counts, or a corrupt entry
    /// that was removed). Best effort.
    func recordRemoval(_ name: EntryName, onlyIfIndexed: Bool) {
        if onlyIfIndexed, state.withLock({ $0.entries?.peek(name) == nil }) { return }
        bestEffort("record a removal") {
            try exclusively { state in
                guard try synchronize(&state, load: false) else { return }
                try append(.remove(name), to: &state)
            }
        }
    }

    /// Removes the entry file at `path` and records it. Throws when the file could not be removed
    /// (it is then still there); a failure to record the removal afterwards is only logged.
    func remove(_ name: EntryName, at path: String) throws {
        let removed: Void? = try exclusively { state in
            let available = try synchronize(&state, load: false)
            try POSIXFile.remove(path)
            if available { bestEffort("record a delete") { try append(.remove(name), to: &state) } }
        }
        // No directory at all: nothing to delete, but make sure of it.
        if removed == nil { try POSIXFile.remove(path) }
    }

    /// Removes every entry file under the index's locks, then replaces the journal with an empty one,
    /// so the limits count from zero again. Nothing to do when the directory does not exist.
    func removeAll() throws {
        try exclusively { state in
            try FileStore<Never>.removeEntryFiles(in: directoryPath)
            state.entries = nil
            try rewrite(&state, keeping: LRUList())
        }
    }

    /// The indexed entries from most to least recently used, when the index is loaded (for tests).
    var loadedNamesByRecency: [EntryName]? {
        state.withLock { $0.entries?.keysByRecency() }
    }

    /// Loads the journal (or catches up with it) and returns the indexed entries from most to least
    /// recently used (for tests); empty when the directory does not exist.
    func synchronizedNamesByRecency() throws -> [EntryName] {
        try exclusively { state in
            try synchronize(&state, load: true)
            return state.entries?.keysByRecency() ?? []
        } ?? []
    }

    // MARK: Locking

    /// Runs `body` with the index to itself: the instance's mutex, then an exclusive `flock` on the
    /// lock file (which is never replaced, unlike the journal). `nil` when the directory does not exist.
    /// The reads noted since the last write (``recordAccess(_:)``) are appended first, so the
    /// journal's order stays the order things happened in this process.
    @discardableResult
    private func exclusively<Result>(_ body: (inout State) throws -> Result) throws -> Result? {
        try state.withLock { state -> Result? in
            guard try lock(&state) else { return nil }
            defer { _ = flock(state.lockFD, LOCK_UN) }
            flushPendingAccesses(&state)
            return try body(&state)
        }
    }

    /// Appends the reads noted since the last write, each as an access with the entry's current size.
    /// A file gone meanwhile (removed by another process) is skipped: a read must not revive it.
    /// Best effort, like the reads themselves.
    private func flushPendingAccesses(_ state: inout State) {
        guard state.pendingAccesses.count > 0 else { return }
        let names = state.pendingAccesses.entriesFromLeastRecent().map(\.key)
        state.pendingAccesses = LRUList()
        bestEffort("record reads") {
            guard try synchronize(&state, load: false) else { return }
            var records: [IndexJournal.Record] = []
            records.reserveCapacity(names.count)
            for name in names {
                var info = stat()
                guard lstat(directoryPath + "/" + name.fileName, &info) == 0 else { continue }
                records.append(.access(name, size: Int(info.st_size)))
            }
            try append(records, to: &state)
        }
    }

    private func lock(_ state: inout State) throws -> Bool {
        for _ in 0..<3 {
            if state.lockFD < 0 {
                let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                if fd < 0 {
                    if errno == ENOENT { return false }
                    throw POSIXFile.Failure(call: "open", path: lockPath, code: errno)
                }
                state.lockFD = fd
            }
            while flock(state.lockFD, LOCK_EX) != 0 {
                guard errno == EINTR else { throw POSIXFile.Failure(call: "flock", path: lockPath, code: errno) }
            }
            // The directory may have been removed and recreated under us: a lock on a file nobody else
            // opens excludes no one, so make sure ours is still the one at the path.
            var atPath = stat()
            var held = stat()
            guard fstat(state.lockFD, &held) == 0 else {
                let code = errno
                _ = flock(state.lockFD, LOCK_UN)
                throw POSIXFile.Failure(call: "fstat", path: lockPath, code: code)
            }
            if stat(lockPath, &atPath) == 0 {
                if atPath.st_dev == held.st_dev, atPath.st_ino == held.st_ino { return true }
            } else if errno != ENOENT {
                let code = errno
                _ = flock(state.lockFD, LOCK_UN)
                throw POSIXFile.Failure(call: "stat", path: lockPath, code: code)
            }
            _ = flock(state.lockFD, LOCK_UN)
            state.closeFiles()
            state.entries = nil
        }
        throw POSIXFile.Failure(call: "flock", path: lockPath, code: EAGAIN)
    }

    // MARK: Journal

    /// Brings `state` up to date with the journal on disk: reopens it when another process replaced it,
    /// cuts a torn final record, and reads records other processes appended (when loaded, or when
    /// `load` asks for the whole journal). Rebuilds a missing or damaged journal when `load`.
    /// Returns whether there is a journal to append to.
    @discardableResult
    private func synchronize(_ state: inout State, load: Bool) throws -> Bool {
        var load = load
        var justOpened = false
        var info = stat()
        if stat(journalPath, &info) != 0 {
            guard errno == ENOENT else { throw POSIXFile.Failure(call: "stat", path: journalPath, code: errno) }
            let wasLoaded = state.entries != nil
            state.closeJournal()
            guard load || wasLoaded else { return false }
            try rebuild(&state, because: "the index file is missing")
            return true
        }
        if state.journal?.device != UInt64(info.st_dev) || state.journal?.inode != UInt64(info.st_ino) {
            // Replaced (compacted or rebuilt by another instance): what we loaded described the old file.
            load = load || state.entries != nil
            state.entries = nil
            state.closeJournal()
            guard let opened = try openJournal() else {
                guard load else { return false }
                try rebuild(&state, because: "the index file has no valid header")
                return true
            }
            state.journal = opened
            justOpened = true
        }
        guard var journal = state.journal else { return false }

        var current = stat()
        guard fstat(journal.fd, &current) == 0 else { throw POSIXFile.Failure(call: "fstat", path: journalPath, code: errno) }
        let body = max(0, Int(current.st_size) - IndexJournal.headerSize)
        let whole = body / IndexJournal.recordSize
        if body % IndexJournal.recordSize != 0 {
            // A crash mid-append left part of a record: cut it, so the next record lands aligned.
            guard ftruncate(journal.fd, off_t(IndexJournal.headerSize + whole * IndexJournal.recordSize)) == 0 else {
                throw POSIXFile.Failure(call: "ftruncate", path: journalPath, code: errno)
            }
        }
        journal.records = whole
        if justOpened { journal.recordsWhenOpened = whole }
        state.journal = journal

        if state.entries == nil, load {
            counts.withLock { $0.journalLoads += 1 }
            var entries = LRUList<EntryName, Int>()
            guard readRecords(of: journal, from: 0, into: &entries) else {
                try rebuild(&state, because: "the index file is damaged")
                return true
            }
            state.entries = entries
            state.journal?.applied = whole
        } else if var entries = state.entries, whole != journal.applied {
            state.entries = nil  // released while it is updated, so it is not copied
            guard whole > journal.applied, readRecords(of: journal, from: journal.applied, into: &entries) else {
                if load {
                    try rebuild(&state, because: "the index file is damaged")
                    return true
                }
                state.closeJournal()
                return false
            }
            state.entries = entries
            state.journal?.applied = whole
        }
        return true
    }

    /// Opens the journal at its path; `nil` when its header is not valid.
    private func openJournal() throws -> OpenJournal? {
        let fd = open(journalPath, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }  // removed since we looked: as good as damaged
            throw POSIXFile.Failure(call: "open", path: journalPath, code: errno)
        }
        var info = stat()
        var header = [UInt8](repeating: 0, count: IndexJournal.headerSize)
        guard fstat(fd, &info) == 0,
              readFully(fd, into: &header, at: 0) == header.count,
              let live = IndexJournal.liveCount(inHeader: header)
        else {
            close(fd)
            return nil
        }
        return OpenJournal(
            fd: fd, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), liveAtCompaction: live, records: 0, applied: 0)
    }

    /// Applies records `start..<journal.records` to `entries`; `false` when one is damaged.
    private func readRecords(of journal: OpenJournal, from start: Int, into entries: inout LRUList<EntryName, Int>) -> Bool {
        let chunkRecords = 4096
        var next = start
        var buffer = [UInt8](repeating: 0, count: chunkRecords * IndexJournal.recordSize)
        while next < journal.records {
            let count = min(chunkRecords, journal.records - next)
            let length = count * IndexJournal.recordSize
            let offset = IndexJournal.headerSize + next * IndexJournal.recordSize
            guard readFully(journal.fd, into: &buffer, count: length, at: offset) == length else { return false }
            let decoded = buffer.withUnsafeBytes { raw -> [IndexJournal.Record]? in
                var records: [IndexJournal.Record] = []
                records.reserveCapacity(count)
                for record in 0..<count {
                    let from = record * IndexJournal.recordSize
                    let slice = UnsafeRawBufferPointer(rebasing: raw[from..<from + IndexJournal.recordSize])
                    guard let decoded = IndexJournal.decode(raw: slice) else { return nil }
                    records.append(decoded)
                }
                return records
            }
            guard let decoded else { return false }
            for record in decoded { Self.apply(record, to: &entries) }
            next += count
        }
        return true
    }

    private static func apply(_ record: IndexJournal.Record, to entries: inout LRUList<EntryName, Int>) {
        switch record {
        case .access(let name, let size): entries.upsert(name, size, cost: size)
        case .remove(let name): entries.remove(name)
        }
    }

    /// Appends `record` at the end of the journal (the lock is held, so the end is ours).
    private func append(_ record: IndexJournal.Record, to state: inout State) throws {
        try append([record], to: &state)
    }

    /// Appends `records`, in order, with one write.
    private func append(_ records: [IndexJournal.Record], to state: inout State) throws {
        guard var journal = state.journal, !records.isEmpty else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(records.count * IndexJournal.recordSize)
        for record in records { IndexJournal.append(record, to: &bytes) }
        let offset = IndexJournal.headerSize + journal.records * IndexJournal.recordSize
        try writeFully(journal.fd, bytes, at: offset, path: journalPath)
        journal.records += records.count
        if state.entries != nil {
            for record in records { Self.apply(record, to: &state.entries!) }
            journal.applied += records.count
        }
        state.journal = journal
    }

    // MARK: Eviction, compaction, rebuild

    private func isOverLimits(_ entries: LRUList<EntryName, Int>) -> Bool {
        if let countLimit, entries.count > countLimit { return true }
        if let byteLimit, entries.totalCost > byteLimit { return true }
        return false
    }

    /// Removes least recently used entries (never `name`, just written) until the limits hold.
    private func evict(keeping name: EntryName, in state: inout State) throws {
        func nextVictim() -> EntryName? {
            guard let entries = state.entries, isOverLimits(entries), let victim = entries.leastRecentKey, victim != name else { return nil }
            return victim
        }
        while let victim = nextVictim() {
            let path = directoryPath + "/" + victim.fileName
            if unlink(path) != 0, errno != ENOENT {
                logger.warning(
                    "could not remove an evicted cache entry",
                    metadata: ["store": "\(storeDescription)", "file": "\(path)", "reason": "\(String(cString: strerror(errno)))"])
            }
            try append(.remove(victim), to: &state)
        }
    }

    /// Compacts the journal once it holds more than twice as many records as live entries. An instance
    /// that has not loaded the journal does not know the live count, and must not load it for nothing:
    /// it looks only once the journal has doubled since it opened it.
    private func compactIfNeeded(_ state: inout State) throws {
        guard let journal = state.journal else { return }
        let threshold = { (live: Int) in max(2 * live, Self.minimumCompactionRecords) }
        guard journal.records > threshold(state.entries?.count ?? journal.recordsWhenOpened) else { return }
        try synchronize(&state, load: true)
        guard let entries = state.entries, let records = state.journal?.records, records > threshold(entries.count) else { return }
        counts.withLock { $0.compactions += 1 }
        try rewrite(&state, keeping: entries)
    }

    private func rebuild(_ state: inout State, because reason: String) throws {
        counts.withLock { $0.rebuilds += 1 }
        state.closeJournal()
        state.entries = nil
        let adopted = try rewrite(&state, keeping: LRUList())
        logger.notice(
            "rebuilt the cache index from the directory",
            metadata: ["store": "\(storeDescription)", "reason": "\(reason)", "entries": "\(adopted)"])
    }

    /// Lists the directory, sweeps stale temporary files, reconciles `entries` with the entry files
    /// there (files the index does not know join as least recently used, oldest first; entries without
    /// a file are dropped), and replaces the journal with one record per live entry, least recent first.
    /// Returns the number of entries adopted from the directory.
    @discardableResult
    private func rewrite(_ state: inout State, keeping entries: LRUList<EntryName, Int>) throws -> Int {
        counts.withLock { $0.directoryScans += 1 }
        let names = try POSIXFile.fileNames(in: directoryPath)
        let now = Date().timeIntervalSince1970
        var present = Set<EntryName>()
        var unknown: [(name: EntryName, size: Int, modified: Double)] = []
        var swept = 0
        for fileName in names {
            let path = directoryPath + "/" + fileName
            if fileName.hasPrefix(Self.temporaryPrefix) {
                if POSIXFile.removeIfOlder(path, than: Self.staleTemporaryAge, now: now) { swept += 1 }
                continue
            }
            guard let name = EntryName(fileName: fileName) else { continue }
            if entries.peek(name) != nil {
                present.insert(name)
                continue
            }
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            unknown.append((name, Int(info.st_size), POSIXFile.modificationTime(info)))
        }
        if swept > 0 {
            counts.withLock { $0.temporaryFilesSwept += swept }
            logger.notice(
                "removed temporary files left by interrupted writes",
                metadata: ["store": "\(storeDescription)", "count": "\(swept)"])
        }

        var rebuilt = LRUList<EntryName, Int>()
        for file in unknown.sorted(by: { ($0.modified, $0.name) < ($1.modified, $1.name) }) {
            rebuilt.upsert(file.name, file.size, cost: file.size)
        }
        for entry in entries.entriesFromLeastRecent() where present.contains(entry.key) {
            rebuilt.upsert(entry.key, entry.element, cost: entry.cost)
        }

        var bytes = IndexJournal.header(liveCount: rebuilt.count)
        bytes.reserveCapacity(bytes.count + rebuilt.count * IndexJournal.recordSize)
        for entry in rebuilt.entriesFromLeastRecent() {
            IndexJournal.append(.access(entry.key, size: entry.element), to: &bytes)
        }
        let temporaryPath = directoryPath + "/" + Self.temporaryPrefix + "index-" + UUID().uuidString
        try POSIXFile.writeNew(Data(bytes), at: temporaryPath, mode: 0o600, sync: synchronizesWrites)
        try POSIXFile.commit(temporaryPath, to: journalPath, sync: synchronizesWrites)

        state.closeJournal()
        guard var journal = try openJournal() else {
            throw POSIXFile.Failure(call: "open", path: journalPath, code: EIO)
        }
        journal.records = rebuilt.count
        journal.recordsWhenOpened = rebuilt.count
        journal.applied = rebuilt.count
        state.journal = journal
        state.entries = rebuilt
        return unknown.count
    }

    private func bestEffort(_ what: String, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            logger.warning(
                "could not \(what) in the cache index; it is repaired at the next compaction",
                metadata: ["store": "\(storeDescription)", "reason": "\(error)"])
        }
    }

    // MARK: State

    struct OpenJournal: Sendable {
        var fd: Int32
        var device: UInt64
        var inode: UInt64
        /// The live-entry count in the header: how many entries the journal held when last written
        /// whole (for diagnostics; the compaction rule uses exact counts).
        var liveAtCompaction: Int
        /// Whole records in the file.
        var records: Int
        /// Whole records in the file when this instance opened it.
        var recordsWhenOpened = 0
        /// Records applied to ``State/entries``.
        var applied: Int
    }

    struct State: Sendable {
        var lockFD: Int32 = -1
        /// Entries read since the journal was last written, by the recency of their latest read (see
        /// ``recordAccess(_:)``).
        var pendingAccesses = LRUList<EntryName, Void>()
        var journal: OpenJournal?
        /// The entries by recency, with their sizes; `nil` until the journal is loaded.
        var entries: LRUList<EntryName, Int>?

        mutating func closeJournal() {
            if let journal { close(journal.fd) }
            journal = nil
        }

        mutating func closeFiles() {
            closeJournal()
            if lockFD >= 0 { close(lockFD) }
            lockFD = -1
        }
    }
}

/// Reads up to `count` bytes (all of `buffer` by default) at `offset`; returns how many were read.
private func readFully(_ fd: Int32, into buffer: inout [UInt8], count: Int? = nil, at offset: Int) -> Int {
    let wanted = min(count ?? buffer.count, buffer.count)
    var filled = 0
    buffer.withUnsafeMutableBytes { raw in
        while filled < wanted {
            let n = pread(fd, raw.baseAddress! + filled, wanted - filled, off_t(offset + filled))
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            filled += n
        }
    }
    return filled
}

/// Writes all of `bytes` at `offset`.
private func writeFully(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws {
    var written = 0
    let failure: Int32? = bytes.withUnsafeBytes { raw -> Int32? in
        while written < raw.count {
            let n = pwrite(fd, raw.baseAddress! + written, raw.count - written, off_t(offset + written))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            written += n
        }
        return nil
    }
    if let failure { throw POSIXFile.Failure(call: "pwrite", path: path, code: failure) }
}
