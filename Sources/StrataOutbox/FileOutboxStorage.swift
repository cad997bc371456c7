import Foundation
import Logging
@_spi(StrataInternals) import Strata
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Entries as files in a directory: one file per entry, written to a temporary file, flushed to
/// disk, then renamed into place, so a crash never leaves a torn entry and a failed write keeps the
/// previous version.
///
/// Each file is a header line (`strata-outbox 1 <SHA-256 of the rest>`) and the entry as JSON; a file
/// whose checksum does not match (bit rot, a hand edit) is renamed to `<name>.unreadable`, logged,
/// and left for an operator. Files are created `0600` in a `0700` directory.
///
/// A drain's attempt (the entry as the drain sends it: its count, a backoff, a merged payload or a new
/// key after a conflict) goes to a second file beside the entry's, `<id>.attempt`, renamed into place
/// without any flush: a killed process leaves it whole, and a power failure at worst loses it, or
/// leaves it unreadable, and then the entry's own file, which a flushed save wrote, is what is read
/// (the write is sent once more).
/// An attempt file names the entry file it is based on (the checksum in that file's header) and counts
/// only beside it, so one left behind by a save killed before removing it is ignored. A removal
/// removes the attempt file first, then the entry's.
///
/// Several processes may share the directory (an App Group container, a volume two workers mount):
/// they agree through its `.coordination` file, locked with `flock` for one short read and write at a
/// time (see ``OutboxStorage``). Keep the directory on a local file system: `flock` over NFS is not
/// reliable.
public final class FileOutboxStorage: OutboxStorage, CustomStringConvertible {
    /// The directory holding the entries.
    public let directory: URL
    /// `directory`'s path: file paths are made from it as strings (`URL.appendingPathComponent(_:)`
    /// asks the file system whether each new path is a directory).
    private let directoryPath: String
    private let logger: Logger
    let coordination: CoordinationFile

    /// Keeps entries in `directory` (created on first write when missing).
    public init(directory: URL, logger: Logger = LoadEnvironment.defaultLogger) {
        self.directory = directory
        self.directoryPath = directory.path
        self.logger = logger
        self.coordination = CoordinationFile(directory: directory.path)
    }

    public var description: String { "FileOutboxStorage(\(directory.path))" }

    static let fileExtension = "outbox"
    static let attemptExtension = "attempt"
    private static let magic = "strata-outbox 1 "
    /// The entries this storage wrote last, with their files' bytes: a drain's read back of its
    /// scope takes them instead of decoding files it wrote itself.
    private let memo = OutboxEntryMemo()

    private func path(for id: UUID) -> String {
        file(id.lowercasedString + "." + Self.fileExtension)
    }

    /// The file of `id`'s latest attempt, saved without a flush.
    private func attemptPath(for id: UUID) -> String {
        file(id.lowercasedString + "." + Self.attemptExtension)
    }

    /// The path of the file `name` in the directory.
    private func file(_ name: String) -> String {
        directoryPath.hasSuffix("/") ? directoryPath + name : directoryPath + "/" + name
    }

    private func temporaryPath() -> String {
        var generator = SystemRandomNumberGenerator()
        let name = String(generator.next() as UInt64, radix: 16) + String(generator.next() as UInt64, radix: 16)
        return file(".tmp-" + name)
    }

    private func failure(_ operation: StoreError.Operation, _ id: UUID?, _ error: any Error) -> StoreError {
        StoreError(store: description, operation: operation, key: id?.lowercasedString, reason: "\(error)", underlying: error)
    }

    public func loadAll() async throws -> [OutboxEntry] {
        try await BlockingIOPool.shared.run { () throws(StoreError) -> [OutboxEntry] in try self.loadAllNow() }
    }

    public func save(_ entry: OutboxEntry) async throws {
        try await BlockingIOPool.shared.run { () throws(StoreError) in try self.saveNow(entry) }
    }

    /// Writes every entry as ``save(_:)`` writes one, with one flush of the directory for all of
    /// them (the outbox's group commit).
    public func save(contentsOf entries: [OutboxEntry]) async throws {
        guard entries.count > 1 else {
            if let entry = entries.first { try await save(entry) }
            return
        }
        try await BlockingIOPool.shared.run { () throws(StoreError) in try self.saveNow(contentsOf: entries) }
    }

    /// Writes the entry's new version to its `.attempt` file (a temporary file renamed into place),
    /// with no flush at all: a killed process leaves the old version or the new one, whole, and a
    /// power failure at worst the version of the entry's own file (the write is then sent once
    /// more). An entry with no file of its own is saved as ``save(_:)`` saves it.
    public func saveAttempt(_ entry: OutboxEntry) async throws {
        try await saveAttempt(entry, removingDelivered: [])
    }

    /// Removes the delivered writes' files, then writes `entry`'s attempt as ``saveAttempt(_:)``
    /// does: no flush for any of it.
    public func saveAttempt(_ entry: OutboxEntry, removingDelivered delivered: [UUID]) async throws {
        try await BlockingIOPool.shared.run { () throws(StoreError) in
            for id in delivered { try self.removeNow(id, flushDirectory: false) }
            try self.saveAttemptNow(entry)
        }
    }

    /// Removes the entry's file and flushes the directory: a discarded write stays gone after a
    /// power failure.
    public func remove(_ id: UUID) async throws {
        try await removeNow(id, flushDirectory: true)
    }

    /// Removes a delivered write's file without flushing the directory: should a power failure
    /// bring it back, it is sent again with its idempotency key.
    public func removeDelivered(_ id: UUID) async throws {
        try await removeNow(id, flushDirectory: false)
    }

    private func removeNow(_ id: UUID, flushDirectory: Bool) async throws {
        try await BlockingIOPool.shared.run { () throws(StoreError) in try self.removeNow(id, flushDirectory: flushDirectory) }
    }

    /// Removes the attempt's file, then the entry's (a process killed in between leaves the entry
    /// at its last flushed save, as after a power failure; never an attempt without its entry).
    private func removeNow(_ id: UUID, flushDirectory: Bool) throws(StoreError) {
        memo.forget(id)
        let path = path(for: id)
        do {
            try POSIXFile.remove(attemptPath(for: id))
            try POSIXFile.remove(path)
        } catch {
            throw failure(.delete, id, error)
        }
        if flushDirectory { POSIXFile.syncDirectory(containing: path) }
    }

    /// The entry with `id`, read from its one file, or `nil` when there is none. A file that is not
    /// an intact entry is set aside as `loadAll()` does (renamed `.unreadable`, logged) and reads as
    /// `nil`; a file holding the entry of another id reads as `nil` and is left alone.
    /// - Throws: `StoreError` (`.retrieve`) when the file exists and cannot be read.
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        try await BlockingIOPool.shared.run { () throws(StoreError) -> OutboxEntry? in try self.entryNow(id) }
    }

    /// The file's bytes for `entry`, remembered in the memo.
    private func encodeRemembered(_ entry: OutboxEntry) throws -> Data {
        let bytes = try Self.encode(entry)
        memo.remember(entry, as: bytes)
        return bytes
    }

    /// The entry in the bytes of `id`'s file, or `nil` when they are not a whole, intact entry of
    /// that id: the memo's entry when they are the bytes it remembers, or the bytes decoded.
    private func decode(_ data: Data, id: UUID) -> OutboxEntry? {
        decode(data, name: id.lowercasedString)
    }

    /// `decode(_:id:)` for the id as files are named by it (lowercase).
    private func decode(_ data: Data, name: String) -> OutboxEntry? {
        if let known = memo.entry(name, bytes: data) { return known }
        guard let entry = Self.decode(data), entry.id.lowercasedString == name else { return nil }
        return entry
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

    /// Writes the entry's file flushed. An attempt file saved before is based on the file this one
    /// replaces, so it no longer counts once the rename is done (and a failed save leaves both as
    /// they were); it is then removed, under the same flush of the directory.
    private func saveNow(_ entry: OutboxEntry) throws(StoreError) {
        do {
            try POSIXFile.createDirectory(directoryPath, mode: 0o700)
            let bytes = try encodeRemembered(entry)
            let temporary = temporaryPath()
            try POSIXFile.writeNew(bytes, at: temporary, mode: 0o600, sync: true)
            try POSIXFile.commit(temporary, to: path(for: entry.id), sync: false)
            unlink(attemptPath(for: entry.id))
            POSIXFile.syncDirectory(containing: path(for: entry.id))
        } catch {
            throw failure(.insert, entry.id, error)
        }
    }

    /// Writes the entry's attempt file, with no flush, based on the entry's file as it is now (the
    /// checksum in its header); an entry with no file is saved flushed.
    private func saveAttemptNow(_ entry: OutboxEntry) throws(StoreError) {
        guard let base = Self.checksum(inHeaderOf: POSIXFile.readPrefix(path(for: entry.id), count: Self.headerLength)) else {
            return try saveNow(entry)
        }
        do {
            let bytes = Self.attemptFile(base: base, entryFile: try encodeRemembered(entry))
            let temporary = temporaryPath()
            try POSIXFile.writeNew(bytes, at: temporary, mode: 0o600, sync: false)
            try POSIXFile.commit(temporary, to: attemptPath(for: entry.id), sync: false)
        } catch {
            throw failure(.insert, entry.id, error)
        }
    }

    /// An entry file's header: `strata-outbox 1 `, 64 hexadecimal digits, a newline.
    private static let headerLength = 16 + 64 + 1
    /// The first line of an attempt file, before the checksum of the entry file it is based on.
    private static let attemptMagic = "strata-outbox-attempt 1 "

    /// The checksum in the header of an entry file whose bytes begin with `prefix`, or `nil`.
    static func checksum(inHeaderOf prefix: Data?) -> String? {
        guard let prefix, prefix.count >= headerLength else { return nil }
        let header = prefix.prefix(headerLength)
        guard header.last == UInt8(ascii: "\n") else { return nil }
        let line = String(decoding: header.dropLast(), as: UTF8.self)
        guard line.hasPrefix(magic) else { return nil }
        return String(line.dropFirst(magic.count))
    }

    /// What an attempt may name as its base to count beside the unreadable entry file `contents`:
    /// the checksum in its header, and the checksum of what follows the header (the body may be whole
    /// and the header's digits what rotted); `nil` when the header does not read at all, and then
    /// any base is taken.
    static func acceptedBases(besideUnreadable contents: Data) -> Set<String>? {
        guard let header = checksum(inHeaderOf: contents) else { return nil }
        return [header, SHA256.hexDigest(of: contents.dropFirst(headerLength))]
    }

    /// The entry in an attempt file's bytes, when they are whole, of the id `name`, and based on the
    /// entry file whose checksum is `base` (any, when `nil`).
    private func decodeAttempt(_ data: Data, name: String, base: String?) -> OutboxEntry? {
        guard let attempt = Self.splitAttempt(data) else { return nil }
        if let base, attempt.base != base { return nil }
        return decode(attempt.entryFile, name: name)
    }

    /// The bytes of an attempt file: its line naming `base`, then `entryFile` (an entry file's bytes).
    static func attemptFile(base: String, entryFile: Data) -> Data {
        var bytes = Data((attemptMagic + base + "\n").utf8)
        bytes.append(entryFile)
        return bytes
    }

    /// An attempt file's bytes split into the checksum of the entry file it is based on and the
    /// entry file's bytes after it; `nil` when they do not begin with an attempt line.
    static func splitAttempt(_ data: Data) -> (base: String, entryFile: Data)? {
        guard let newline = data.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        let line = String(decoding: data[data.startIndex..<newline], as: UTF8.self)
        guard line.hasPrefix(attemptMagic) else { return nil }
        return (String(line.dropFirst(attemptMagic.count)), Data(data[data.index(after: newline)...]))
    }

    private func saveNow(contentsOf entries: [OutboxEntry]) throws(StoreError) {
        var current: UUID?
        do {
            try POSIXFile.createDirectory(directoryPath, mode: 0o700)
            let files = try entries.map { entry in
                current = entry.id
                return (data: try encodeRemembered(entry), path: path(for: entry.id), temporaryPath: temporaryPath())
            }
            current = nil
            try POSIXFile.writeAtomically(files, in: directoryPath, mode: 0o600)
            // Attempts saved before are based on the files replaced, so no longer count; removed
            // (best effort: one left behind is ignored all the same).
            for entry in entries { unlink(attemptPath(for: entry.id)) }
        } catch {
            throw failure(.insert, current ?? entries.first?.id, error)
        }
    }

    private func entryNow(_ id: UUID) throws(StoreError) -> OutboxEntry? {
        let path = path(for: id)
        let read: (data: Data, inode: UInt64)?
        do {
            read = try POSIXFile.read(path)
        } catch {
            throw failure(.retrieve, id, error)
        }
        guard let (contents, inode) = read else { return nil }
        guard let entry = decode(contents, id: id) else {
            // Not an intact entry (set aside), or the entry of another id (left alone).
            guard Self.decode(contents) == nil else { return nil }
            return setAside(path, inode: inode, contents: contents, keepingAttemptOf: id.lowercasedString)
        }
        return latestAttempt(of: entry, fileContents: contents)
    }

    /// `entry` as its attempt file has it, when that file holds a whole version of it based on the
    /// entry's file as it is (`fileContents`); `entry` otherwise (no attempt saved since the last
    /// flushed save, or the attempt lost or torn by a power failure).
    private func latestAttempt(of entry: OutboxEntry, fileContents: Data) -> OutboxEntry {
        guard let contents = try? POSIXFile.read(attemptPath(for: entry.id))?.data,
              let attempt = decodeAttempt(contents, name: entry.id.lowercasedString, base: Self.checksum(inHeaderOf: fileContents))
        else { return entry }
        return attempt
    }

    /// The entry in the attempt file at `path` whose entry file is gone, when it is whole and based
    /// on a copy of that file set aside as unreadable (one of `names`): the write's one whole copy,
    /// left when saving it in its place failed. `nil` otherwise: the write was removed, or the
    /// attempt is older than what was set aside.
    private func orphanAttempt(_ path: String, stem: String, names: [String]) -> OutboxEntry? {
        guard let data = try? POSIXFile.read(path)?.data, let split = Self.splitAttempt(data) else { return nil }
        let copies = names.filter { $0.hasPrefix(stem + "." + Self.fileExtension + ".unreadable") }
        let based = copies.contains { copy in
            guard let contents = try? POSIXFile.read(file(copy))?.data else { return false }
            return Self.acceptedBases(besideUnreadable: contents)?.contains(split.base) ?? true
        }
        return based ? decode(split.entryFile, name: stem) : nil
    }

    /// Sets the unreadable entry file at `path` (the file `inode`, which held `contents`) aside,
    /// unless another reader did already; when the entry's attempt file (`name`) holds a whole
    /// version of it based on that file (any, when its header is unreadable too), that version is
    /// saved again as the entry's file (flushed) and returned.
    private func setAside(_ path: String, inode: UInt64, contents: Data, keepingAttemptOf name: String) -> OutboxEntry? {
        let bases = Self.acceptedBases(besideUnreadable: contents)
        let attempt = (try? POSIXFile.read(file(name + "." + Self.attemptExtension))?.data).flatMap { data -> OutboxEntry? in
            guard let split = Self.splitAttempt(data), bases?.contains(split.base) ?? true else { return nil }
            return decode(split.entryFile, name: name)
        }
        // Another reader may have set it aside and saved the attempt in its place meanwhile: the
        // file at `path` is then a good one, left alone, and read.
        guard POSIXFile.inode(of: path) == inode else { return (try? POSIXFile.read(path)?.data).flatMap { decode($0, name: name) } }
        setAside(path)
        guard let attempt else { return nil }
        do {
            try saveNow(attempt)
            logger.error(
                "outbox entry unreadable; its latest attempt was whole and is saved again in its place",
                metadata: ["outbox.storage": "\(description)", "outbox.entry": "\(name)"])
        } catch {
            logger.error(
                "outbox entry unreadable; its latest attempt is whole but could not be saved again (kept as it is)",
                metadata: ["outbox.storage": "\(description)", "outbox.entry": "\(name)", "error": "\(error)"])
        }
        return attempt
    }

    private func loadAllNow() throws(StoreError) -> [OutboxEntry] {
        let names: [String]
        do {
            names = try POSIXFile.fileNames(in: directoryPath)
        } catch let error as POSIXFile.Failure where error.code == ENOENT {
            return []
        } catch {
            throw failure(.retrieve, nil, error)
        }
        var entries: [OutboxEntry] = []
        let now = Date().timeIntervalSince1970
        let named = Set(names)
        for name in names {
            let path = file(name)
            if name.hasPrefix(".tmp-") {
                // A write that did not finish (the process died before its rename): the entry it was
                // writing is still whole in its previous version, or was never acknowledged.
                _ = POSIXFile.removeIfOlder(path, than: 60, now: now)
                continue
            }
            if name.hasSuffix(".\(Self.attemptExtension)") {
                let stem = String(name.dropLast(Self.attemptExtension.count + 1))
                guard !named.contains(stem + "." + Self.fileExtension) else { continue }
                // An attempt without its entry's file, once old (a removal in another process may be
                // between its two steps now). Beside the entry's file set aside as unreadable, it is
                // the write's one whole copy (saving it in its place failed then): saved again.
                // Otherwise the write was removed (an attempt renamed into place while another
                // process removed it): removed too.
                guard POSIXFile.isOlder(path, than: 60, now: now) else { continue }
                if let attempt = orphanAttempt(path, stem: stem, names: names) {
                    if (try? saveNow(attempt)) != nil { entries.append(attempt) }
                } else {
                    _ = POSIXFile.removeIfOlder(path, than: 60, now: now)
                }
                continue
            }
            guard name.hasSuffix(".\(Self.fileExtension)") else { continue }
            let stem = name.dropLast(Self.fileExtension.count + 1)
            let read: (data: Data, inode: UInt64)?
            do {
                read = try POSIXFile.read(path)
            } catch {
                throw failure(.retrieve, nil, error)
            }
            guard let (contents, inode) = read else { continue }  // removed meanwhile
            if let entry = decode(contents, name: String(stem)) {
                entries.append(named.contains("\(stem).\(Self.attemptExtension)") ? latestAttempt(of: entry, fileContents: contents) : entry)
            } else if let entry = Self.decode(contents) {
                entries.append(entry)  // named otherwise than by its id (copied in by hand)
            } else if let attempt = setAside(path, inode: inode, contents: contents, keepingAttemptOf: String(stem)) {
                entries.append(attempt)
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

// MARK: - Shared by processes

extension FileOutboxStorage {
    public var isSharedByProcesses: Bool { true }

    public func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome {
        try await coordinated(.insert, scope: scope) { state in
            let decision = OutboxClaimRule.decide(held: state.claims[scope], by: claimant, until: expiresAt, now: now)
            if let store = decision.store { state.claims[scope] = store }
            return decision.outcome
        }
    }

    public func release(scope: String, for claimant: OutboxClaimant) async throws {
        try await coordinated(.delete, scope: scope) { state in
            if OutboxClaimRule.releases(state.claims[scope], by: claimant) { state.claims[scope] = nil }
        }
    }

    public func nextSequence(after: UInt64) async throws -> UInt64 {
        try await coordinated(.insert, scope: nil) { state in
            state.sequence = max(state.sequence, after) &+ 1
            return state.sequence
        }
    }

    public func lastSequenceIssued() async throws -> UInt64? {
        try await coordinated(.retrieve, scope: nil) { state in state.sequence }
    }

    /// The longest this storage (in this process) held its directory's lock, for one claim, release
    /// or sequence: never while a write is sent, whatever the network does.
    public var longestLockHold: Duration { coordination.longestHold }

    /// What the processes sharing the directory agree on, kept in `.coordination` (JSON) and changed
    /// only under an exclusive `flock` of that file: the last sequence given, and who drains which scope.
    struct Coordination: Codable {
        var sequence: UInt64 = 0
        var claims: [String: OutboxScopeClaim] = [:]
    }

    /// Runs `change` on the directory's coordination state under its lock (taken within
    /// `CoordinationFile/lockTimeout`) and writes it back when it changed.
    private func coordinated<Result: Sendable>(
        _ operation: StoreError.Operation, scope: String?, _ change: @escaping @Sendable (inout Coordination) -> Result
    ) async throws -> Result {
        let file = coordination
        let description = description
        return try await BlockingIOPool.shared.run { () throws(StoreError) -> Result in
            do {
                try POSIXFile.createDirectory(file.directory, mode: 0o700)
                return try file.update(change)
            } catch {
                throw StoreError(store: description, operation: operation, key: scope, reason: "\(error)", underlying: error)
            }
        }
    }
}

/// The `.coordination` file of a ``FileOutboxStorage`` directory, read and written whole under an
/// exclusive `flock` held for that read and write only (microseconds): a process killed while
/// holding it loses the lock with its descriptor, and one stopped while holding it (a debugger, a
/// suspended app) makes the others fail after `lockTimeout` instead of waiting for ever.
final class CoordinationFile: Sendable {
    let directory: String
    let path: String
    /// How long a claim waits for another process's hold of the lock.
    static let lockTimeout: Duration = .seconds(2)
    private let longest = Locked<Duration>(.zero)

    init(directory: String) {
        self.directory = directory
        self.path = (directory as NSString).appendingPathComponent(".coordination")
    }

    var longestHold: Duration { longest.withLock { $0 } }

    struct LockTimedOut: Error, CustomStringConvertible {
        var path: String
        var description: String {
            "another process has held \(path)'s lock for over \(CoordinationFile.lockTimeout) (stopped while holding it?)"
        }
    }

    /// The file, opened once and kept open (`-1` until then); its lock also serialises this process's
    /// own calls, since a `flock` held through one descriptor does not exclude other threads using it.
    private let descriptor = Locked<Int32>(-1)

    deinit {
        descriptor.withLock { if $0 >= 0 { close($0) } }
    }

    func update<Result>(_ change: (inout FileOutboxStorage.Coordination) -> Result) throws -> Result {
        try descriptor.withLock { fd throws -> Result in
            // The file the path names now: the one kept open, unless the directory was removed and
            // made again meanwhile (every process must lock the same file).
            var named = stat(), opened = stat()
            if fd >= 0, stat(path, &named) != 0 || fstat(fd, &opened) != 0 || named.st_ino != opened.st_ino || named.st_dev != opened.st_dev {
                close(fd)
                fd = -1
            }
            if fd < 0 {
                fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                guard fd >= 0 else { throw POSIXFile.Failure(call: "open", path: path, code: errno) }
            }
            return try update(fd, change)
        }
    }

    private func update<Result>(_ fd: Int32, _ change: (inout FileOutboxStorage.Coordination) -> Result) throws -> Result {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: Self.lockTimeout)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw POSIXFile.Failure(call: "flock", path: path, code: errno) }
            guard clock.now < deadline else { throw LockTimedOut(path: path) }
            usleep(200)  // another process holds it for one short read and write
        }
        let taken = clock.now
        defer {
            let held = clock.now - taken
            flock(fd, LOCK_UN)
            longest.withLock { if held > $0 { $0 = held } }
        }
        let before = try readAll(fd)
        // Unreadable (a hand edit; never a crash: each write is one pwrite): start afresh. Claims are
        // leases that lapse anyway, and a sequence is never below what the asking outbox has seen.
        var state = (try? JSONDecoder().decode(FileOutboxStorage.Coordination.self, from: before)) ?? .init()
        let result = change(&state)
        let after = try JSONEncoder().encode(state)
        if after != before {
            let written = after.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            guard written == after.count else { throw POSIXFile.Failure(call: "pwrite", path: path, code: written < 0 ? errno : EIO) }
            guard ftruncate(fd, off_t(after.count)) == 0 else { throw POSIXFile.Failure(call: "ftruncate", path: path, code: errno) }
        }
        return result
    }

    private func readAll(_ fd: Int32) throws -> Data {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var offset: off_t = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw POSIXFile.Failure(call: "pread", path: path, code: errno)
            }
            if n == 0 { return data }
            data.append(contentsOf: chunk[..<n])
            offset += off_t(n)
        }
    }
}
